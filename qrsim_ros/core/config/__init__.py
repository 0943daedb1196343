"""The typed scenario: YAML files (config/<name>.yaml) loaded and checked onto the models' own parameter
dataclasses (``scenario.load_scenario``)."""
