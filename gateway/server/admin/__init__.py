"""The admin API and console: the catalog view, editing and saving definition files, templates, and the guarded
writes."""
