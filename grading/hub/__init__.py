"""The course's JupyterHub set-up: hub config, the class's nbgrader config, and the formgrader's feedback fix."""
