"""triemine.config: the settings tree's machinery and the named configurations.

Modules: ``settings`` (declared fields, their flags and keys), ``configurations`` (the named
configurations, one JSON record each under ``records/``).
"""
