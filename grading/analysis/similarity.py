"""How alike the submissions of one assignment are: ranked pairs, for an instructor looking for copies.

Data -> statistics: :func:`grading.analysis.loading.load_answers` reads every
submission's answer cells (nothing is run); :func:`compare` ranks the pairs of
submissions, code cells and written answers separately, and for a quiz lists the
pairs whose letters were copied.  :mod:`grading.analysis.similarity_page` turns
the result into the page and the CSV.

The detector is `copydetect <https://github.com/blingenf/copydetect>`_
(MIT licence, pure Python on NumPy and Pygments, about 0.2 MB installed, no
network): MOSS's winnowing over Pygments tokens with every name replaced by one
placeholder, so renaming variables changes nothing; the release's stub is left
out (its lines dropped, its fingerprints given as boilerplate), so the code
every student starts from never counts.  We
compared it with Dolos (``@dodona/dolos-lib`` 3.5, MIT, npm) on the synthetic
class of every chapter assignment that keeps right answers in other styles
(``grading/analysis/synthetic.py``: the model answer, a renamed copy, a copy
with statements reordered and comments added, and the independent kept right
answers): both ranked every copied pair above every independent pair on every
one of these assignments (19 when we compared).  Measured once here: Dolos took
about 13 s for 200 submissions of ``ch10-efficiency`` (Node.js start included),
and its install is 455 MB of ``node_modules`` with native tree-sitter
grammars whose build tools ask for Node.js 22 (Debian's is 20), and Python
reaches it only through a subprocess and its JSON; copydetect runs in the same
process and gives the matched fragments as character ranges of the original
source, which is what the side-by-side view highlights.  Dolos is the more
actively developed (Ghent University's Dodona team); copydetect is a small
project of one maintainer, a small risk here since we use two of its functions
(:class:`copydetect.CodeFingerprint`, :func:`copydetect.compare_files`) and
pin its version.  ``tests/test_similarity.py`` asserts copydetect's ranking on every such
assignment, and ``bench/bench_similarity.py`` times the report for 200
submissions.

Scores
------
For one cell of two submissions ``a`` and ``b``, copydetect finds the code
fragments they share (after the stub is removed); the score is the shared part
of both, ``(overlap_a + overlap_b) / (tokens_a + tokens_b)``, in ``[0, 1]``
(tokens counted over the fingerprinted, non-stub code).  A pair's code score
sums the same numerators and denominators over all its code cells, its written
score over its written answers.  A cell left as released (blank) contributes
nothing to either.

Copied letters: where a quiz shows every student the options in their own
order, two students whose letters are the same on a question while their orders
make those letters mean different options have most likely copied the letters
(:func:`letter_pairs`); two students who chose the same rare wrong option
(chosen by at most :data:`RARE` of the class) is a weaker signal, also listed.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import re
from dataclasses import dataclass, field

import copydetect.utils
import numpy as np
from copydetect import CodeFingerprint, compare_files

from attnlib import quiz, variants
from grading.analysis.loading import CODE, LETTERS, WRITTEN, ClassAnswers, answer_value

__all__ = ["CellMatch", "LetterPair", "Pair", "RARE", "Similarity", "compare", "fingerprints", "letter_pairs",
           "own_text", "ranked_pairs"]

#: copydetect's noise threshold (k-gram length, characters of tokenised code) and winnowing window for code:
#: its defaults (noise 25, guarantee 30).
CODE_K, CODE_WINDOW = 25, 6
#: The same for written answers, untokenised text: a Chinese character carries about as much as a code token.
TEXT_K, TEXT_WINDOW = 12, 4
#: A wrong option is rare when at most this share of the class chose it.
RARE = 0.10


def stable_kgrams(string: str, k: int) -> np.ndarray:
    """Hashes of all k-grams of ``string`` (int64), the same in every process.

    copydetect hashes k-grams with Python's ``hash``, which is salted per process: the winnowed
    fingerprints, so the scores, would change from one run to the next.  This is its
    ``copydetect.utils.hashed_kgrams`` with BLAKE2b in place of ``hash``: the same class always gives
    the same ranking.
    """
    return np.array([int.from_bytes(hashlib.blake2b(string[i:i + k].encode("utf-8"), digest_size=8).digest(),
                                    "big", signed=True) for i in range(len(string) - k + 1)], dtype=np.int64)


copydetect.utils.hashed_kgrams = stable_kgrams  # what CodeFingerprint calls (through get_document_fingerprints)


@dataclass
class CellMatch:
    """What two submissions share in one answer cell.

    Attributes
    ----------
    cell : str
        Grade id.
    score : float
        ``(overlap_a + overlap_b) / (tokens_a + tokens_b)``.
    overlap, tokens : (int, int)
        Shared and fingerprinted tokens of ``a`` and of ``b``.
    slices : (ndarray, ndarray)
        Shape (2, n_fragments) each: start and end offsets of the shared fragments in ``a``'s and ``b``'s source.
    """

    cell: str
    score: float
    overlap: tuple
    tokens: tuple
    slices: tuple


@dataclass
class Pair:
    """Two submissions and how alike their code (or their written answers) are, cell by cell."""

    a: str
    b: str
    kind: str
    score: float
    cells: list = field(default_factory=list)


@dataclass
class LetterPair:
    """Two quiz submissions whose letters agree suspiciously.

    Attributes
    ----------
    a, b : str
    copied : list of int
        Questions where both wrote the same letters, which mean different options in their two orders.
    rare : list of int
        Questions where both chose the same wrong option, one at most :data:`RARE` of the class chose.
    compared : int
        Questions both answered with valid letters.
    """

    a: str
    b: str
    copied: list
    rare: list
    compared: int


@dataclass
class Similarity:
    """Everything the similarity page shows."""

    answers: ClassAnswers
    code: list
    written: list
    letters: list
    blank: dict
    prints: dict = field(default_factory=dict)


def own_text(source: str, template: str) -> str:
    """``source`` without the lines it keeps from the released ``template`` (signature lines stay, for context).

    The stub's docstring, hints and ``raise NotImplementedError()`` are the same in every submission; what is
    left is what the student wrote.  (copydetect also gets the stub's fingerprints as boilerplate, which covers
    what a student kept of a line; dropping whole lines keeps the stub's docstring out of the side-by-side view,
    where copydetect, which reads a string as one token, would mark all of it.)
    """
    given = {line.strip() for line in template.splitlines() if line.strip()}
    kept = "\n".join(line for line in source.splitlines()
                     if line.strip() not in given or line.lstrip().startswith(("def ", "class ")))
    return re.sub(r"\n\s*\n(\s*\n)+", "\n\n", kept)  # the removed docstring leaves no run of blank lines


def _fingerprint(source: str, kind: str, boilerplate) -> CodeFingerprint:
    if kind == CODE:
        return CodeFingerprint("answer.py", CODE_K, CODE_WINDOW, boilerplate=boilerplate, fp=io.StringIO(source),
                               language="python")
    return CodeFingerprint("answer.txt", TEXT_K, TEXT_WINDOW, boilerplate=boilerplate, fp=io.StringIO(source),
                           filter=False)


def fingerprints(answers: ClassAnswers) -> tuple[dict, dict]:
    """Per code or written cell, ``{student: CodeFingerprint}`` of every answer that is not the stub left as it was.

    The stub's own fingerprints are copydetect's boilerplate: they are removed from every answer's.

    Returns
    -------
    (dict, dict)
        ``{grade id: {student: CodeFingerprint}}`` (of :func:`own_text`, which ``raw_code`` holds) and
        ``{grade id: number of blank answers}``.
    """
    prints, blank = {}, {}
    for cell in answers.cells:
        if cell.kind not in (CODE, WRITTEN):
            continue
        stub = np.array(sorted(_fingerprint(cell.template, cell.kind, None).hashes), dtype=np.int64)
        prints[cell.grade_id], blank[cell.grade_id] = {}, 0
        for student, cells in answers.answers.items():
            source = cells[cell.grade_id]
            if source.strip() == cell.template.strip():
                blank[cell.grade_id] += 1
                continue
            fp = _fingerprint(own_text(source, cell.template), cell.kind, stub)
            if fp.hashes:
                prints[cell.grade_id][student] = fp
            else:
                blank[cell.grade_id] += 1  # nothing left once the stub is taken out
    return prints, blank


def _match(cell: str, fa: CodeFingerprint, fb: CodeFingerprint) -> CellMatch | None:
    if fa.hashes.isdisjoint(fb.hashes):
        return None
    _, (sim_a, sim_b), slices = compare_files(fa, fb)
    tokens = (int(fa.token_coverage), int(fb.token_coverage))
    overlap = (round(sim_a * tokens[0]), round(sim_b * tokens[1]))
    if not sum(overlap):
        return None
    return CellMatch(cell, sum(overlap) / sum(tokens), overlap, tokens, slices)


def ranked_pairs(answers: ClassAnswers, prints: dict, kind: str) -> list[Pair]:
    """Every pair of submissions with something in common in cells of ``kind``, the most alike first.

    The score of a pair sums, over the cells of that kind, the shared tokens of both and the fingerprinted
    tokens of both (a cell only one of them answered adds its tokens to the denominator).
    """
    cells = [c.grade_id for c in answers.cells if c.kind == kind]
    students = sorted(answers.answers)
    tokens = {s: sum(int(prints[c][s].token_coverage) for c in cells if s in prints[c]) for s in students}
    matches: dict[tuple, list] = {}
    for cell in cells:
        here = prints[cell]
        for a, b in itertools.combinations(sorted(here), 2):
            match = _match(cell, here[a], here[b])
            if match is not None:
                matches.setdefault((a, b), []).append(match)
    pairs = [Pair(a, b, kind, sum(sum(m.overlap) for m in found) / (tokens[a] + tokens[b]), found)
             for (a, b), found in matches.items()]
    return sorted(pairs, key=lambda p: (-p.score, p.a, p.b))


def _letters(source: str, n_options: int) -> frozenset | None:
    try:
        return quiz.parse_answer(answer_value(source), variants.LETTERS[:n_options])
    except quiz.InvalidAnswer:
        return None


def letter_pairs(answers: ClassAnswers) -> list[LetterPair]:
    """Quiz pairs with copied letters (same letters, different meaning) or the same rare wrong options.

    Only pairs with at least one such question are returned, the most copied first.
    """
    cells = [c for c in answers.cells if c.kind == LETTERS]
    shown, canonical = {}, {}
    for student, sources in answers.answers.items():
        for cell in cells:
            letters = _letters(sources[cell.grade_id], cell.n_options)
            if letters is None:
                continue
            shown[student, cell.grade_id] = letters
            order = variants.order(student if cell.variants else None, cell.variants, cell.number, cell.n_options)
            canonical[student, cell.grade_id] = frozenset(variants.shown_to_canonical("".join(letters), order))
    n = max(1, len(answers.answers))
    rare = {}
    for cell in cells:
        key = answers.keys.get(cell.grade_id)
        chosen = [canonical[s, cell.grade_id] for s in answers.answers if (s, cell.grade_id) in canonical]
        counts = {c: chosen.count(c) for c in set(chosen)}
        rare[cell.grade_id] = {c for c, k in counts.items() if key is not None and c != key and 2 <= k <= RARE * n}
    out = []
    for a, b in itertools.combinations(sorted(answers.answers), 2):
        both = [c for c in cells if (a, c.grade_id) in shown and (b, c.grade_id) in shown]
        copied = [c.number for c in both if shown[a, c.grade_id] == shown[b, c.grade_id]
                  and canonical[a, c.grade_id] != canonical[b, c.grade_id]]
        rares = [c.number for c in both if canonical[a, c.grade_id] == canonical[b, c.grade_id]
                 and canonical[a, c.grade_id] in rare[c.grade_id]]
        if copied or rares:
            out.append(LetterPair(a, b, copied, rares, len(both)))
    return sorted(out, key=lambda p: (-len(p.copied), -len(p.rare), p.a, p.b))


def compare(answers: ClassAnswers) -> Similarity:
    """All the statistics of the similarity page (code, written answers, quiz letters)."""
    prints, blank = fingerprints(answers)
    return Similarity(answers, ranked_pairs(answers, prints, CODE), ranked_pairs(answers, prints, WRITTEN),
                      letter_pairs(answers), blank, prints)
