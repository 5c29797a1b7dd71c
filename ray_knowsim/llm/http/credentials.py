"""Keeping API keys out of configs, logs and errors: what looks like a credential, and the key itself.

The config holds only the NAME of the environment variable with the API key. The value lives in a
``Secret`` that prints as ``***``, pickles as the variable name (a copy sent to a Ray worker
re-reads the worker's environment) and is scrubbed from every text we log. The ``_credential*``
helpers find (and hide) credential-like fields, so that a key pasted into the wrong place is
refused without being echoed back.
"""

from __future__ import annotations

import os
import re
from typing import Any

_CREDENTIAL_NAMES = frozenset(
    {"api_key", "apikey", "key", "authorization", "token", "access_token", "secret", "password",
     "x_api_key", "auth_token", "bearer", "bearer_token", "client_secret", "refresh_token", "private_key",
     "credentials", "hf_token", "session_token", "passwd"}
)


def _credential_like(name: Any) -> bool:
    """A field name that usually carries a secret (``api-key``, ``Authorization``, ``hf_token``, ...)."""
    norm = str(name).lower().replace("-", "_")
    return norm in _CREDENTIAL_NAMES or norm.endswith(("_api_key", "_secret", "_password"))


# the shape of well-known API tokens (OpenAI, Hugging Face, GitHub, Slack, AWS access keys)
_TOKEN_SHAPE = r"(sk-|sk_|hf_|ghp_|gho_|github_pat_|xox[abp]-|AKIA)[A-Za-z0-9_\-]{12,}"
_TOKEN_VALUE = re.compile(f"^{_TOKEN_SHAPE}$")
# the same shape inside free text (a server's error message), and the value of an auth header
_TOKEN_IN_TEXT = re.compile(rf"\b{_TOKEN_SHAPE}")
_BEARER_IN_TEXT = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}")


def mask_secrets(text: str) -> str:
    """``text`` with every credential-shaped piece replaced by ``***``: a server that echoes the
    request's key in its error message must not put it in a result row. (The client also removes
    its own key, whatever its shape: :meth:`Secret.scrub`.)"""
    return _BEARER_IN_TEXT.sub(lambda m: m.group(1) + "***", _TOKEN_IN_TEXT.sub("***", text))


def _secret_like(key: Any, value: Any) -> bool:
    if not isinstance(value, str):
        return _credential_like(key)
    # "<hidden>": a secret-shaped value that validation replaced before checking (still refused)
    return _credential_like(key) or value == "<hidden>" or bool(_TOKEN_VALUE.match(value.strip()))


def credential_paths(value: Any, path: str = "") -> list[str]:
    """Dotted paths of credential-like keys (or token-shaped values) anywhere in a nested mapping/list."""
    found: list[str] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = [(f"[{i}]", v) for i, v in enumerate(value)]
    else:
        return found
    for k, v in items:
        here = (f"{path}{k}" if str(k).startswith("[") else f"{path}.{k}") if path else str(k)
        if _secret_like(k, v):
            found.append(here)
        else:
            found += credential_paths(v, here)
    return found


def hide_credentials(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ("<hidden>" if _secret_like(k, v) else hide_credentials(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [("<hidden>" if _secret_like("", v) else hide_credentials(v)) for v in value]
    return value


class MissingAPIKeyError(RuntimeError):
    """The configured environment variable is unset or empty."""


class Secret:
    """An API key that never shows itself: ``***`` in repr/str, its env NAME when pickled."""

    __slots__ = ("env_name", "_value")

    def __init__(self, env_name: str, value: str) -> None:
        self.env_name = env_name
        self._value = value

    @classmethod
    def from_env(cls, env_name: str) -> "Secret":
        value = os.environ.get(env_name)
        if value is None or not value.strip():
            raise MissingAPIKeyError(
                f"environment variable {env_name} (named by api_key_env) is "
                + ("not set" if value is None else "set but empty")
            )
        return cls(env_name, value.strip())

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str) -> str:
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return f"<secret from ${self.env_name}>"

    __str__ = __repr__

    def __reduce__(self):
        return (Secret.from_env, (self.env_name,))


def auth_header(header: str, secret: Secret | None) -> dict[str, str]:
    """The credential header of a request to an endpoint: ``Authorization: Bearer <key>``, or the
    raw key under any other header name (``api-key``, ``x-api-key``); none without a key."""
    if secret is None:
        return {}
    key = secret.reveal()
    return {header: f"Bearer {key}" if header.lower() == "authorization" else key}


__all__ = ["MissingAPIKeyError", "Secret", "auth_header", "credential_paths", "hide_credentials", "mask_secrets"]
