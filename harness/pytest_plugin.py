"""pytest plugin: ``--device`` and the fixtures device test suites use."""
