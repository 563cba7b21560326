"""The requests lab's tools: `labkit requests explain` (what each stage of the API server's request
pipeline decided about a request) and `labkit requests webhook` (serving certificates from the lab's
webhook CA, and a runner that serves a student's admission webhook as a lab process)."""
