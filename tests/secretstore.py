"""A store with planted credentials, built with the core's own writers (shared by
tests/test_secrets.py and tests/test_redact.py).

Planted (values random per build, so that nothing real is ever in a test):

* an AWS access key id in a tool result (``s-main`` seq 3), and the same key
  in a user message that a forgotten fact cited (``s-forgot`` seq 1, excluded);
* a GitHub token in a user message (``s-main`` seq 4);
* a private key in ``notes/keys.md`` and in its ``.bak``;
* a password URL in a fact's own text (and in the user message it cites,
  ``s-main`` seq 6).

Facts that must keep validating after redaction cite user messages whose span
holds no planted value: ``keep-main`` (``s-main`` seq 1) and ``keep-other``
(``s-other`` seq 1).  ``stale`` cites ``s-main`` 3..5, a span that holds the
tool result with the key: redaction makes it stale, and the dry run says so.
The compaction in ``s-main`` (seq 7) covers seqs 1..4: its lineage digest
changes too.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Planted:
    store: Path
    slug: str
    values: dict[str, str]                                 # name -> value
    facts: dict[str, str] = field(default_factory=dict)    # role -> fact id


def _rand(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def build(base: Path, seed: int | None = None) -> Planted:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.markdown import note_target, write
    from lecode_memctl.core.sessions import SessionStore
    from lecode_memctl.core.sourceref import SourceRef, canonical_digest

    rng = random.Random(seed)
    upper = string.ascii_uppercase + string.digits
    alnum = string.ascii_letters + string.digits
    aws = "AKIA" + _rand(rng, upper, 16)
    ghp = "ghp_" + _rand(rng, alnum, 36)
    password = _rand(rng, alnum, 14)
    url = f"postgres://deploy:{password}@db.internal:5432/app"
    body = "\n".join(_rand(rng, alnum + "+/", 64) for _ in range(8))
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"

    st = store_at(base / "store")
    facts = FactStore(st.facts_db)
    sessions = SessionStore(st, exclusions=facts)

    def ref(sid: str, a: int, b: int, seqs=None) -> SourceRef:
        return SourceRef(sid, tuple(seqs or range(a, b + 1)),
                         canonical_digest(sessions.records(sid, a, b)))

    with sessions.create("s-forgot", created="2026-05-01T09:00:00Z") as w:
        w.append_message("user", f"my key is {aws}, remember it")                      # 1
    gone = facts.add("The user's AWS key is on file.", ref=ref("s-forgot", 1, 1)).fact.fact_id
    facts.forget(gone)
    gen = facts.generation()

    with sessions.create("s-main", created="2026-05-01T10:00:00Z") as w:
        w.append_message("user", "We deploy with make deploy.")                          # 1
        w.append_message("assistant", "", epoch=gen, tool_calls=[
            {"id": "c1", "name": "shell", "arguments": {"cmd": "cat .env"}}])            # 2
        w.append_message("tool", f"AWS_ACCESS_KEY_ID={aws}\nREGION=eu-west-1\n",
                         tool_call_id="c1", name="shell", epoch=gen)                     # 3
        w.append_message("user", f"use this token: {ghp}")                               # 4
        w.append_message("assistant", "Done.", epoch=gen)                                # 5
        w.append_message("user", f"the deploy database is {url}")                        # 6
        w.append_event("compact", summary="Deploy setup discussed.",
                       lineage=[{"session_id": "s-main", "seqs": [1, 2, 3, 4],
                                 "digest": canonical_digest(sessions.records("s-main", 1, 4))}],
                       prior=None, model="m", usage=None)                                # 7
        w.append_message("user", "Tests run with pytest -q.")                            # 8
    with sessions.create("s-other", created="2026-05-02T10:00:00Z") as w:
        w.append_message("user", "Release notes go in CHANGES.md.")                      # 1

    p = Planted(st.path, st.slug, {"aws": aws, "ghp": ghp, "password": password, "url": url,
                                   "pem": pem, "pem_body_line": body.split("\n")[3]})
    p.facts["keep-main"] = facts.add("We deploy with make deploy.",
                                     ref=ref("s-main", 1, 1)).fact.fact_id
    p.facts["keep-tests"] = facts.add("Tests run with pytest -q.",
                                      ref=ref("s-main", 8, 8)).fact.fact_id
    p.facts["keep-other"] = facts.add("Release notes go in CHANGES.md.",
                                      ref=ref("s-other", 1, 1)).fact.fact_id
    p.facts["stale"] = facts.add("The deploy reads .env.", ref=ref("s-main", 3, 5)).fact.fact_id
    p.facts["password"] = facts.add(f"The deploy database URL is {url}",
                                    ref=ref("s-main", 6, 6)).fact.fact_id
    p.facts["forgotten"] = gone
    facts.close()

    write(st, note_target("keys"), f"# keys\n\n{pem}\n")
    write(st, note_target("keys"), f"# keys\n\n{pem}\n\nrotated: no\n")   # .bak keeps the key
    return p


def _b64url_json(obj: dict[str, str]) -> str:
    import base64
    import json

    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def long_tokens(seed: int | None = None) -> dict[str, tuple[str, str]]:
    """Credentials in their longer real-world shapes, each longer than what
    detect-secrets' own pattern matches (or than its first pattern): name ->
    (line holding it, the value that must go whole).  Random per seed."""
    rng = random.Random(seed)
    alnum = string.ascii_letters + string.digits
    b64url = alnum + "-_"
    jwt = ".".join((_b64url_json({"alg": "HS256", "typ": "JWT"}),
                    _b64url_json({"sub": _rand(rng, string.digits, 10), "name": _rand(rng, alnum, 12)}),
                    _rand(rng, alnum, 20) + "_" + _rand(rng, b64url, 22)))
    aws_secret = _rand(rng, alnum + "/+", 40)
    ghp = "ghp_" + _rand(rng, alnum, 52)
    slack = f"xoxb-{_rand(rng, string.digits, 12)}-{_rand(rng, string.digits, 13)}-{_rand(rng, alnum, 24)}"
    hook = (f"https://hooks.slack.com/services/T{_rand(rng, alnum, 10)}/B{_rand(rng, alnum, 10)}/"
            f"{_rand(rng, alnum, 24)}")
    password = _rand(rng, alnum, 10) + "-" + _rand(rng, alnum, 6) + "." + _rand(rng, alnum, 6)
    stripe = "sk_live_" + _rand(rng, alnum, 99)
    openai = "sk-proj-" + _rand(rng, b64url, 40) + _rand(rng, alnum, 20) + "T3BlbkFJ" + \
        _rand(rng, alnum, 20) + _rand(rng, b64url, 40) + _rand(rng, alnum, 1)
    discord = "M" + _rand(rng, alnum, 25) + "." + _rand(rng, b64url, 6) + "." + _rand(rng, alnum, 38)
    body = "\n".join(_rand(rng, alnum + "+/", 70) for _ in range(6))
    ssh = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----"
    return {
        "jwt": (f"AUTH={jwt}", jwt),
        "aws_secret": (f'aws_secret_access_key = "{aws_secret}"', aws_secret),
        "ghp": (f"GH_TOKEN={ghp}", ghp),
        "slack": (f"bot token {slack} (rotate monthly)", slack),
        "slack_hook": (f"alerts go to {hook}", hook),
        "password": (f"db is mysql://deploy:{password}@db.internal:3306/app", password),
        "stripe": (f"STRIPE={stripe}", stripe),
        "openai": (f"OPENAI_API_KEY={openai}", openai),
        "discord": (f"discord: {discord}", discord),
        "ssh_key": (ssh, ssh),
    }


def plant_long_tokens(p: Planted, seed: int | None = None) -> dict[str, str]:
    """Append :func:`long_tokens` to the store's MEMORY.md; name -> value."""
    toks = long_tokens(seed)
    md = p.store / "MEMORY.md"
    old = md.read_text() if md.exists() else "# Memory\n"
    md.write_text(old + "\n" + "".join(f"{line}\n\n" for line, _v in toks.values()))
    return {name: v for name, (_line, v) in toks.items()}


def chunks(value: str, n: int = 8) -> set[str]:
    """Every ``n``-character piece of ``value`` (any longer piece holds one)."""
    return {value[i:i + n] for i in range(len(value) - n + 1)}
