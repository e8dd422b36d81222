/* KV-cache memory calculator of the course book (book/_ext/kvcalc.py writes the form).
   Cache:   bytes = L × 2 × n × h_kv × d_head × b × B   (attnlib's KVCache.nbytes)
   Weights: 12 · d_model² · L numbers (chapter 11), W_K and W_V shrinking with h_kv (chapter 16):
            (10 · d_model² + 2 · d_model · h_kv · d_head) · L,  d_model = h · d_head.
   Exact integer arithmetic (BigInt); everything runs in the page: no kernel, no network. */
(function () {
  "use strict";

  var NAMES = {
    layers: "层数 L", heads: "查询头数 h", "kv-heads": "键值头数 h_kv", "d-head": "每个头的宽度 d_head",
    tokens: "上下文长度 n", batch: "批量 B"
  };
  var LIMIT = 1000000000000;  // 10^12 per field: far beyond any model, and every shown number stays finite

  function grouped(big) {  // 17179869184n -> "17,179,869,184"
    return big.toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  function size(big) {  // bytes -> "16.00 GiB" (binary units, as the chapters use)
    var units = [["TiB", 40], ["GiB", 30], ["MiB", 20], ["KiB", 10]];
    var x = Number(big);
    for (var i = 0; i < units.length; i++) {
      var unit = Math.pow(2, units[i][1]);
      if (x >= unit) { return (x / unit).toFixed(2) + " " + units[i][0]; }
    }
    return grouped(big) + " 字节";
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  /* One field's value as a BigInt, or a Chinese message. */
  function read(input) {
    var raw = input.value.trim();
    var name = NAMES[input.name];
    if (input.validity && input.validity.badInput) { return name + " 必须是正整数，请只填数字。"; }
    if (raw === "") { return "请填写" + name + "（正整数）。"; }
    if (/^-/.test(raw)) { return name + " 不能是负数，请填写正整数。"; }
    if (!/^\d+$/.test(raw)) { return name + " 必须是正整数，不能有小数点或指数。"; }
    var value = BigInt(raw);
    if (value < 1n) { return name + " 至少为 1，收到 " + raw + "。"; }
    if (value > BigInt(LIMIT)) { return name + " 太大了：最多 " + grouped(BigInt(LIMIT)) + "。"; }
    return value;
  }

  function line(box, cls, parts) {  // parts: strings, or [class, text] for a highlighted number
    var p = el("p", cls);
    parts.forEach(function (part) {
      if (typeof part === "string") { p.appendChild(document.createTextNode(part)); }
      else { p.appendChild(el(part[0] === "strong" ? "strong" : "span", part[1], part[2])); }
    });
    box.appendChild(p);
  }

  function update(calc) {
    var form = calc.querySelector("form");
    var box = calc.querySelector(".kvcalc-result");
    var v = {}, errors = [];
    Array.prototype.forEach.call(form.querySelectorAll("input"), function (input) {
      var got = read(input);
      var msg = document.getElementById(input.getAttribute("aria-describedby"));
      if (typeof got === "string") {
        errors.push(got);
        input.setAttribute("aria-invalid", "true");
        msg.textContent = got;
      } else {
        v[input.name] = got;
        input.removeAttribute("aria-invalid");
        msg.textContent = "";
      }
    });
    if (v.heads !== undefined && v["kv-heads"] !== undefined && v.heads % v["kv-heads"] !== 0n) {
      var text = "查询头数 h = " + grouped(v.heads) + " 必须是键值头数 h_kv = " + grouped(v["kv-heads"]) +
        " 的整数倍（每组 h / h_kv 个查询头共用一组键和值；多头注意力就是 h_kv = h）。";
      errors.push(text);
      var kv = form.querySelector("input[name='kv-heads']");
      kv.setAttribute("aria-invalid", "true");
      document.getElementById(kv.getAttribute("aria-describedby")).textContent =
        "h = " + grouped(v.heads) + " 不是 " + grouped(v["kv-heads"]) + " 的整数倍。";
    }
    box.textContent = "";
    if (errors.length) {
      box.className = "kvcalc-result kvcalc-invalid";
      line(box, "kvcalc-error", ["无法计算：" + errors.join(" ")]);
      return;
    }
    box.className = "kvcalc-result";
    var select = form.querySelector("select");
    var dtype = select.value;
    var b = BigInt(select.options[select.selectedIndex].getAttribute("data-bytes"));
    var L = v.layers, h = v.heads, hkv = v["kv-heads"], d = v["d-head"], n = v.tokens, B = v.batch;

    var perToken = L * 2n * hkv * d * b;  // one token of one sequence, all layers
    var cache = perToken * n * B;
    var dModel = h * d;
    var mha = hkv === h;
    var weights = mha ? 12n * dModel * dModel * L : (10n * dModel * dModel + 2n * dModel * hkv * d) * L;
    var weightBytes = weights * b;
    calc.setAttribute("data-cache-bytes", cache.toString());
    calc.setAttribute("data-weight-numbers", weights.toString());

    line(box, "kvcalc-cache", ["KV 缓存：", ["strong", "kvcalc-cache-size", size(cache)],
      "（", ["span", "kvcalc-cache-bytes", grouped(cache)], " 字节）"]);
    line(box, "kvcalc-formula", ["L × 2 × n × h_kv × d_head × b × B = " + [L, 2n, n, hkv, d, b, B].map(grouped)
      .join(" × ") + " = " + grouped(cache) + " 字节"]);
    line(box, "kvcalc-per-token", ["每个序列每多一个词元，缓存多 ", ["span", "kvcalc-token-size", size(perToken)],
      "（" + grouped(perToken) + " 字节）。"]);
    var formula = mha
      ? "12 × d_model² × L = 12 × " + grouped(dModel) + "² × " + grouped(L)
      : "(10 × d_model² + 2 × d_model × h_kv × d_head) × L = (10 × " + grouped(dModel) + "² + 2 × " +
        grouped(dModel) + " × " + grouped(hkv) + " × " + grouped(d) + ") × " + grouped(L);
    line(box, "kvcalc-weights", ["各层权重：", formula, " = ", ["span", "kvcalc-weight-numbers", grouped(weights)],
      " 个数（d_model = h × d_head = " + grouped(dModel) + "），用 " + dtype + " 存是 ",
      ["strong", "kvcalc-weight-size", size(weightBytes)], "。"]);
    var ratio = Number(cache) / Number(weightBytes);
    var compare = ratio >= 1
      ? ["缓存是权重的 ", ["strong", "kvcalc-ratio", ratio.toFixed(2) + " 倍"], "，比模型本身还大。"]
      : ["缓存相当于权重的 ", ["strong", "kvcalc-ratio", (100 * ratio).toFixed(1) + "%"], "。"];
    var cross = weightBytes / (perToken * B);  // tokens at which the cache reaches the weights (floor)
    if (cross > 0n) {
      compare.push("批量为 " + grouped(B) + " 时，上下文超过 ", ["span", "kvcalc-cross", grouped(cross)],
        " 个词元，缓存就比权重大。");
    } else {
      compare.push("批量为 " + grouped(B) + " 时，只缓存 1 个词元就比权重大。");
    }
    line(box, "kvcalc-compare", compare);
    line(box, "kvcalc-note", [(mha ? "" : "W_K、W_V 只有 h_kv 个头，比多头注意力小；") +
      "权重按 MLP 宽 4 d_model 估算，不含词嵌入，与缓存用同一种数据类型。"]);
  }

  function setup(calc) {
    var form = calc.querySelector("form");
    form.addEventListener("input", function () { update(calc); });
    form.addEventListener("change", function () { update(calc); });
    form.addEventListener("submit", function (e) { e.preventDefault(); update(calc); });
    form.addEventListener("reset", function () { setTimeout(function () { update(calc); }, 0); });
    update(calc);
    calc.classList.add("kvcalc-ready");
  }

  function init() { Array.prototype.forEach.call(document.querySelectorAll(".kvcalc"), setup); }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", init); }
  else { init(); }
}());
