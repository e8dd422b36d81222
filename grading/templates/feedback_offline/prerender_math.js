// Typesets the math of an HTML fragment with MathJax 3 in Node.js, at feedback-generation time.
// Usage: node prerender_math.js MATHJAX_DIR < fragment.json  (a JSON string of HTML)
// Writes JSON {count, css, body}: how many expressions were typeset, the stylesheet they need, and the
// fragment with each one replaced by inline SVG (one shared glyph cache), so the page needs no script.
// The options are those the browser used before (grading/templates/feedback_offline/mathjax.html.j2).
const dir = process.argv[2];
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const fragment = JSON.parse(input);
  require(dir + "/node-main.js").init({
    loader: {paths: {mathjax: dir}, load: ["adaptors/liteDOM", "input/tex", "output/svg"]},
    tex: {inlineMath: [["$", "$"], ["\\(", "\\)"]], displayMath: [["$$", "$$"], ["\\[", "\\]"]],
          processEscapes: true},
    svg: {fontCache: "global"},
    options: {ignoreHtmlClass: "tex2jax_ignore", processHtmlClass: "tex2jax_process"},
    startup: {typeset: false, document: "<!DOCTYPE html><html><head></head><body>" + fragment + "</body></html>"},
  }).then((MathJax) => {
    const adaptor = MathJax.startup.adaptor;
    const html = MathJax.startup.document;
    html.render();
    const count = Array.from(html.math).length;
    const css = adaptor.textContent(MathJax.svgStylesheet());
    process.stdout.write(JSON.stringify({count, css, body: adaptor.innerHTML(adaptor.body(html.document))}));
  }).catch((error) => {
    process.stderr.write(String((error && error.stack) || error));
    process.exit(1);
  });
});
