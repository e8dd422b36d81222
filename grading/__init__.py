"""The grading chain's instructor-side code: nbgrader feedback hooks, sample submissions, the chain itself."""
