"""The instructor-side analyses of a graded class, each read as data -> statistics -> page.

* :mod:`~grading.analysis.loading` -- the data: one assignment of a class folder as nbgrader left it
  (gradebook, ``submitted/`` and ``autograded/`` notebooks), quiz letters in canonical options;
* :mod:`~grading.analysis.items` -> :mod:`~grading.analysis.item_page` -- item analysis (``make report``);
* :mod:`~grading.analysis.similarity` -> :mod:`~grading.analysis.similarity_page` -- similarity of
  submissions (``make similarity``);
* :mod:`~grading.analysis.page` -- the one page template both pages are written into.

Nothing here runs a student's code, and nothing here is shown to students: the pages live in the class
folder's ``reports/``.
"""
