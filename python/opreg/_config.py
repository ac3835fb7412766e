"""opreg.config: the OPREG_* configuration of the process-wide registry, readable and settable.

Attributes mirror the environment variables (docs/env.md): device (OPREG_DEVICE),
backend_order, disable, force_variant (lists, or the environment's comma-separated string),
fallback ('error', 'warn', 'silent' or None), verbose (0-2), num_threads (0: the machine's
cores) and plugins (read-only: opreg.load_plugin adds). A value is validated as its variable
would be; on error nothing changes and the opreg exception says why.
"""
from . import _opreg

_SETTABLE = ("device", "backend_order", "disable", "force_variant", "fallback", "verbose", "num_threads")


class Config:
    __slots__ = ()

    def as_dict(self):
        """The whole configuration as a dict."""
        return _opreg.get_config()

    def update(self, **changes):
        """Sets several keys at once (validated together)."""
        _opreg.update_config(changes)

    def reload(self):
        """Re-reads the OPREG_* environment variables (on error nothing changes)."""
        _opreg.reload_config()

    @staticmethod
    def variables():
        """The OPREG_* variables opreg reads."""
        return _opreg.config_variables()

    def __getattr__(self, name):
        values = _opreg.get_config()
        if name not in values:
            raise AttributeError(f"opreg.config has no {name!r}; keys: {', '.join(values)}")
        return values[name]

    def __setattr__(self, name, value):
        if name == "plugins":
            raise AttributeError("opreg.config.plugins is read-only: opreg.load_plugin(path) loads one")
        _opreg.update_config({name: value})

    def __dir__(self):
        return list(_SETTABLE) + ["plugins", "as_dict", "update", "reload", "variables"]

    def __repr__(self):
        return "opreg.config(" + ", ".join(f"{k}={v!r}" for k, v in _opreg.get_config().items()) + ")"


config = Config()
