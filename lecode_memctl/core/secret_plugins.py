"""memctl's own detectors: detect-secrets plugins for credentials its
default set has no pattern for (or too narrow a one).

Each is made (:func:`own_plugins`) a subclass of detect-secrets'
``RegexBasedDetector`` with its own ``analyze_line`` and
``analyze_string``, so the detector's gate (:func:`.secrets._regex_gate`)
skips it on a line none of its patterns can match, and every pattern
begins with a literal (a token's prefix) that Python's regex engine looks
for first.  A plugin's detector id is its ``secret_type`` as
:func:`.secrets.detector_slug` makes it: a plugin that widens one of
detect-secrets' (GitHub's fine-grained tokens) takes that one's type, so
``--detector github-token`` and a hash in the allowlist cover both.
detect-secrets is imported only when the plugins are made (when a
:class:`.secrets.Detector` is built), never by importing this module."""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Callable
from typing import Any, NamedTuple


def base64_bytes(value: str) -> bytes | None:
    """The bytes ``value`` is base64 of (its padding optional), or None when
    it is no base64."""
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except ValueError:      # (binascii.Error among them)
        return None


def _basic_credentials(value: str) -> bool:
    """Whether ``value`` is base64 of printable ``user:password`` text."""
    raw = base64_bytes(value)
    try:
        text = "" if raw is None else raw.decode()
    except UnicodeDecodeError:
        return False
    return ":" in text and len(text) >= 3 and text.isprintable()


def _not_placeholder(value: str) -> bool:
    """Whether ``value`` is no placeholder: no run of 8 or more x's or X's
    (``hf_xxxxxxxx...``, ``whsec_XXXX...``, as documentation writes one)."""
    return _PLACEHOLDER.search(value) is None


_PLACEHOLDER = re.compile(r"[xX]{8,}")


def _opaque_token(value: str) -> bool:
    """Whether ``value`` looks made by a machine, not a placeholder
    (``YOUR_ACCESS_TOKEN_GOES_HERE``): a digit in it, or letters of both cases."""
    return _not_placeholder(value) and (any(c.isdigit() for c in value) or (
        any(c.islower() for c in value) and any(c.isupper() for c in value)))


class OwnPlugin(NamedTuple):
    name: str                  # the plugin's class name
    secret_type: str           # its detector id: detector_slug(secret_type)
    patterns: tuple[str, ...]  # its denylist
    doc: str
    #: a value the pattern found is a credential only if this says so
    #: (:meth:`.secrets.Detector._filtered`, as the plugin's ``memctl_valid``)
    valid: Callable[[str], bool] | None = None


#: memctl's own plugins, in addition to detect-secrets' default set: the
#: one place they are defined.
OWN_PLUGINS: tuple[OwnPlugin, ...] = (
    OwnPlugin("GitHubFineGrainedTokenDetector", "GitHub Token",
              (r"github_pat_[A-Za-z0-9]{20,}_[A-Za-z0-9]{50,}",),
              "GitHub's fine-grained personal access tokens, github_pat_ then 22 and 59 "
              "alphanumerics joined by _ (detect-secrets' GitHub pattern has only ghp_, "
              "gho_, ghu_, ghs_, ghr_)."),
    OwnPlugin("BasicAuthURLDetector", "Basic Auth Credentials",
              (r"://[^\s:/?#@'\"`<>\[\]]*:(?!\d*[/?#]|\d+[^A-Za-z0-9]|\[REDACTED:)"
               r"([^\s'\"`<>@:/\[\]]+(?:@[^\s'\"`<>@:/?#\[\]]*)*)"
               r"@(?:[A-Za-z0-9._~%-]+|\[[0-9A-Fa-f:.]+\])(?![A-Za-z0-9._~%@-])",),
              "A password in a URL, scheme://[user]:password@host, with any of "
              "?#@!$&'()*+,;= in it (detect-secrets' pattern takes none and needs a "
              "user): the password runs to the last @ before the host, an @ after a ? "
              "or # that follows an @ is the query's; not a quote, a space, <>, a :, a "
              "/ or [] (which a URL's password holds percent-encoded: without them a "
              "password could run on into the next URL), nor an empty password, nor a "
              "port and a path (host:3000/users/me@example.com) or a port and any "
              "other sign (localhost:3000,http://...), nor redact's marker."),
    OwnPlugin("NpmAccessTokenDetector", "NPM tokens",
              (r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])",),
              "An npm access token, npm_ then 36 alphanumerics, wherever it is "
              "(detect-secrets' pattern finds one only in .npmrc's _authToken= form)."),
    OwnPlugin("PrivateKeyFormatsDetector", "Private Key",
              (r"BEGIN ENCRYPTED PRIVATE KEY", r"PuTTY-User-Key-File-3"),
              "Private keys of the formats detect-secrets' list lacks: PKCS#8 encrypted "
              "(-----BEGIN ENCRYPTED PRIVATE KEY-----) and PuTTY's version 3 key files "
              "(it has version 2).  Their blocks are found whole, as every private key's "
              "(secrets._pem_span)."),
    OwnPlugin("AnthropicKeyDetector", "Anthropic API Key",
              (r"sk-ant-[a-z]+[0-9]{2}-[A-Za-z0-9_-]{32,}",),
              "Anthropic's API keys, sk-ant-api03-... (and admin keys), quoted or not."),
    OwnPlugin("AuthorizationBearerDetector", "Authorization Header",
              (r"Bearer +([A-Za-z0-9._~+/-]{20,}=*)",),
              "An opaque bearer token, Bearer then 20 or more token characters (a curl "
              "-H 'Authorization: Bearer ...', a header's value in a tool call's "
              "arguments); not a placeholder without a digit nor letters of both cases.",
              _opaque_token),
    OwnPlugin("AuthorizationBasicDetector", "Authorization Header",
              (r"Basic +([A-Za-z0-9+/]{8,}={0,2})",),
              "HTTP basic credentials, Basic then base64 of user:password.",
              _basic_credentials),
    OwnPlugin("SlackAppTokenDetector", "Slack Token",
              (r"xapp-[0-9]+-[A-Za-z0-9]+-[0-9]+-[A-Za-z0-9]+",
               r"xoxe(?:\.xox[a-z])?-[0-9]+-[A-Za-z0-9]{20,}",
               r"https://hooks\.slack\.com/(?:triggers|workflows)/[A-Za-z0-9]+/[0-9]+/[A-Za-z0-9]+"),
              "Slack's app-level tokens (xapp-), token rotation's refresh tokens (xoxe-, "
              "xoxe.xoxp-) and workflow trigger URLs, which detect-secrets' Slack "
              "patterns lack."),
    OwnPlugin("HuggingFaceTokenDetector", "Hugging Face Token",
              (r"hf_[A-Za-z]{34}(?![A-Za-z0-9])",),
              "Hugging Face access tokens, hf_ then 34 letters."),
    OwnPlugin("GoogleApiKeyDetector", "Google API Key",
              (r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])",),
              "Google API keys, AIza then 35 characters."),
    OwnPlugin("StripeWebhookSecretDetector", "Stripe Webhook Secret",
              (r"whsec_[A-Za-z0-9+/=]{32,}",),
              "Stripe webhook signing secrets, whsec_ then 32 or more characters."),
)

#: The plugins whose hit is a private key: its whole block is the value.
PRIVATE_KEY_PLUGINS = frozenset({"PrivateKeyDetector", "PrivateKeyFormatsDetector"})


@functools.cache
def _classes() -> tuple[type[Any], ...]:
    from detect_secrets.plugins.base import RegexBasedDetector

    return tuple(type(p.name, (RegexBasedDetector,),
                      {"__doc__": p.doc, "__module__": __name__, "secret_type": p.secret_type,
                       "denylist": [re.compile(r) for r in p.patterns],
                       # (a token's placeholder, hf_xxxx..., whsec_XXXX..., is none;
                       # a private key's block is judged as every private key's)
                       "memctl_valid": staticmethod(p.valid) if p.valid is not None
                       else None if p.name in PRIVATE_KEY_PLUGINS
                       else staticmethod(_not_placeholder)})
                 for p in OWN_PLUGINS)


def own_plugins() -> list[Any]:
    """An instance of each of :data:`OWN_PLUGINS`."""
    return [kind() for kind in _classes()]
