"""The reference material of labkit's built-in labs, for instructors and tests.

labs/<lab>/solutions/, mistakes/ and mutants/ (the same files as in labkit's repository), found by
labkit.paths.instructor_labs() when the installed labkit's own labs carry none. Students install
labkit alone; instructors add this package (`pip install 'labkit[instructor]'`)."""
