"""Credential detection, review rv7 (2026-12-07): values missed, and
ordinary content taken for a credential.  Every value here is made up."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from .conftest import run_cli


def _note_store(base: Path, text: str) -> Path:
    store = base / "store"
    (store / "notes").mkdir(parents=True)
    (store / "notes" / "n.md").write_text(text)
    return store


def _transcript_store(base: Path, **arguments: str) -> Path:
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    st = store_at(base / "store")
    fs = FactStore(st.facts_db)
    with SessionStore(st, exclusions=fs).create("s1") as w:
        w.append_message("assistant", "", epoch=fs.generation(), tool_calls=[
            {"id": "c1", "name": "write_file", "arguments": dict(arguments)}])
    fs.close()
    return Path(st.path)


def _secrets(store: Path, *args: str) -> list[dict]:
    r = run_cli("--store", str(store), "--no-state", "secrets", "--format", "jsonl",
                "--jobs", "1", *args)
    assert r.exit_code in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    return [f for f in map(orjson.loads, r.stdout.splitlines()) if f.get("type") == "secret"]


def _found(tmp_path: Path, text: str) -> list[tuple[str, int]]:
    return [(f["detector"], f["length"]) for f in _secrets(_note_store(tmp_path, text))]


def _redacted(store: Path) -> None:
    r = run_cli("--store", str(store), "--no-state", "redact", "--yes")
    assert r.exit_code == 0, r.stdout + r.stderr


# -- 1. a call on the right of an assignment hides no value with a pattern of its own

CALLS = {
    'aws-access-key': ('s3 = boto3.client("s3", aws_access_key_id="AKIAZ7QW3ERT5YU6IOP2")',
                       "AKIAZ7QW3ERT5YU6IOP2"),
    'github-token': ('gh = Github("ghp_Zq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7Y")',
                     "ghp_Zq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7Y"),
    'basic-auth-credentials': ('engine = create_engine("postgresql://app:Zq8Lw3Xn5Rk2Vb7@db/app")',
                               "Zq8Lw3Xn5Rk2Vb7"),
    'openai-token': ('client = OpenAI(api_key="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")',
                     "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"),
}


@pytest.mark.parametrize("detector", sorted(CALLS))
def test_a_value_with_a_pattern_of_its_own_is_found_in_an_assigned_call(tmp_path, detector):
    line, value = CALLS[detector]
    assert (detector, len(value)) in _found(tmp_path, line + "\n")


def test_a_private_key_in_an_assigned_call_is_found(tmp_path):
    line = ('key = load_pem_private_key(b"-----BEGIN RSA PRIVATE KEY-----\\n'
            'MIIEowIBAAKCAQEAzq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7\\n'
            '-----END RSA PRIVATE KEY-----", None)\n')
    assert [d for d, _n in _found(tmp_path, line)] == ["private-key"]


def test_an_assigned_call_in_a_tool_calls_arguments_is_found_and_redacted(tmp_path):
    content = "\n".join(line for line, _v in CALLS.values())
    store = _transcript_store(tmp_path, path="app.py", content=content)
    found = {f["detector"] for f in _secrets(store)}
    assert set(CALLS) <= found, found
    _redacted(store)
    text = (store / "sessions" / "s1.jsonl").read_text()
    for _line, value in CALLS.values():
        assert value not in text
    assert _secrets(store) == []


def test_a_keyword_assignment_of_a_call_is_still_no_finding(tmp_path):
    # (detect-secrets' indirect reference: the keyword detector's hit alone)
    assert _found(tmp_path, 'password = get_secret("db_password")\n'
                            'api_key = os.environ["OPENAI_KEY_SECRET"]\n') == []


# -- 2. GitHub's fine-grained tokens

GITHUB_PAT = "github_pat_11AZQ8LW3X0" + "Zq8Lw3Xn5Rk" + "_" + ("Zq8Lw3Xn5Rk2Vb7Yt4Hm" * 3)[:59]


def test_a_github_fine_grained_token_is_a_github_token(tmp_path):
    assert len(GITHUB_PAT) == 93
    assert _found(tmp_path, f"GH_TOKEN={GITHUB_PAT} gh pr list\n") == [("github-token", 93)]


def test_a_short_github_pat_prefix_is_no_token(tmp_path):
    assert _found(tmp_path, "tokens begin github_pat_11AZQ8 and go on\n") == []


def test_the_detector_option_and_the_allowlist_cover_the_fine_grained_token(tmp_path):
    store = _note_store(tmp_path, f"token {GITHUB_PAT}\nold ghp_Zq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7Y\n")
    found = _secrets(store)
    assert [f["detector"] for f in found] == ["github-token", "github-token"]
    allow = tmp_path / "allow"
    allow.write_text("".join(f["hash"] + "\n" for f in found))
    assert _secrets(store, "--allowlist", str(allow)) == []
    r = run_cli("--store", str(store), "--no-state", "redact", "--detector", "github-token",
                "--yes")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert GITHUB_PAT not in (store / "notes" / "n.md").read_text()


# -- 3. passwords in URLs: reserved characters, an empty user, a UUID

URL_PASSWORDS = {
    "postgres://app:Zq8Lw3Xn!Rk2Vb7@db:5432/app": "Zq8Lw3Xn!Rk2Vb7",
    "mysql://root:ab$cdZq8Lw3Xn5@db/app": "ab$cdZq8Lw3Xn5",
    "redis://:Zq8Lw3Xn5Rk2Vb7Yt4Hm@redis:6379/0": "Zq8Lw3Xn5Rk2Vb7Yt4Hm",
    "amqp://guest:6f1c2a3b-4d5e-4f60-8a9b-0c1d2e3f4a5b@rabbit/": "6f1c2a3b-4d5e-4f60-8a9b-0c1d2e3f4a5b",
    "mongodb://admin:Zq8Lw3Xn@5Rk2@mongo:27017/db?authSource=admin": "Zq8Lw3Xn@5Rk2",
    "postgres://app:Zq8Lw3Xn5Rk2@db/app?contact=ops@example.com": "Zq8Lw3Xn5Rk2",
}


@pytest.mark.parametrize("url", sorted(URL_PASSWORDS))
def test_a_password_in_a_url_is_found_whatever_it_holds(tmp_path, url):
    password = URL_PASSWORDS[url]
    store = _note_store(tmp_path, f"DATABASE_URL={url}\nconnect to '{url}' now\n")
    found = _secrets(store)
    assert [(f["detector"], f["length"]) for f in found] == \
        [("basic-auth-credentials", len(password))] * 2, found
    _redacted(store)
    text = (store / "notes" / "n.md").read_text()
    assert password not in text and "@" in text


@pytest.mark.parametrize("text", [
    "postgres://app:@db/app",                          # an empty password
    "see http://localhost:3000/users/me@example.com",  # a port and a path, no password
    "git clone https://github.com/org/repo.git and mail me@example.com",
    "a ratio 3:2 or a@b here, then s3://bucket/key",
    # (a code review: a port followed by a sign, and a run into the next URL)
    "[http://localhost:5173](http://localhost:5173/@vite/client)",
    "Open http://localhost:3000,http://localhost:3000/@fs/app/main.ts",
    "CORS_ORIGINS=http://localhost:3000,https://app.example.com/@me",
    "proxy=http://proxy.corp:3128,no_proxy=git@github.com",
    "url=http://localhost:4000|user=a@b.com",
    "https://example.com:8443;jsessionid=abc@x",
    "http://[::1]:3000/users/me@example.com",
    "http://[2001:db8::1]/npm/@scope/pkg",
    "cvs://:pserver:anoncvs@sources.redhat.com:/cvs/src",
])
def test_what_is_no_password_in_a_url_is_not_found(tmp_path, text):
    assert _found(tmp_path, text + "\n") == []


# -- 4. npm tokens outside .npmrc

NPM = "npm_Zq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7Y"


@pytest.mark.parametrize("line", [f"NPM_TOKEN={NPM}", f'{{"token": "{NPM}"}}',
                                  f"export NODE_AUTH_TOKEN={NPM}",
                                  f"//registry.npmjs.org/:_authToken={NPM}"])
def test_an_npm_token_is_found_in_any_form(tmp_path, line):
    assert _found(tmp_path, line + "\n") == [("npm-tokens", len(NPM))]


def test_npm_words_are_no_npm_token(tmp_path):
    assert _found(tmp_path, "npm_config_cache=/tmp/x npm_package_version=1.2.3 "
                            "npm_lifecycle_event_and_some_more_words_here\n") == []


# -- 5. PuTTY v3 keys and PKCS#8 encrypted keys

BODY = "\n".join(("MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQIZq8Lw3Xn5Rk2Vb7" + str(i)) * 1
                 for i in range(6))
ENCRYPTED = f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{BODY}\n-----END ENCRYPTED PRIVATE KEY-----"
PUTTY3 = ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy\n"
          "Public-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAIZq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7\n"
          "Yt4HmZq8Lw3Xn5Rk\nPrivate-Lines: 1\nAAAAIGZq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7Yt4Hm\n"
          "Private-MAC: 6f1c2a3b4d5e4f608a9b0c1d2e3f4a5b6f1c2a3b4d5e4f608a9b0c1d2e3f4a5b")


@pytest.mark.parametrize("key", [ENCRYPTED, PUTTY3], ids=["pkcs8-encrypted", "putty-v3"])
def test_a_private_key_of_another_format_is_found_whole_and_erased(tmp_path, key):
    store = _note_store(tmp_path, f"the deploy key:\n{key}\n\nnothing else\n")
    found = _secrets(store)
    assert [(f["detector"], f["line"], f["length"]) for f in found] == \
        [("private-key", 2, len(key))], found
    _redacted(store)
    text = (store / "notes" / "n.md").read_text()
    assert all(line not in text for line in key.splitlines()[1:]), text
    assert text.endswith("\n\nnothing else\n")
    assert _secrets(store) == []


def test_a_putty_key_file_word_alone_is_one_finding_of_its_line(tmp_path):
    # (the v2 and v3 headers: each its block)
    assert [d for d, _n in _found(tmp_path, PUTTY3.replace("-3:", "-2:") + "\n")] == \
        ["private-key"]


# -- 6. more token shapes a coding agent's memory holds

ANTHROPIC = "sk-ant-api03-" + ("Zq8Lw3Xn5Rk2Vb7Yt4Hm-_" * 5)[:93] + "AA"
BEARER = "Zq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2.Vb7Yt4Hm"
BASIC = "ZGVwbG95ZXI6WnE4THczWG41Ums="                       # deployer:Zq8Lw3Xn5Rk
XAPP = "xapp-1-A0Z8Q3LW3XN-5512345678901-" + "6f1c2a3b4d5e4f608a9b0c1d2e3f4a5b" * 2
XOXE = "xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTAtWnE4THczWG41UmsyVmI3WXQ0SG0"
TRIGGER = "https://hooks.slack.com/triggers/T0Z8Q3LW3XN/5512345678901/6f1c2a3b4d5e4f608a9b0c1d2e3f4a5b"
HF = "hf_" + ("ZqLwXnRkVbYtHm" * 3)[:34]
GOOGLE = "AIza" + ("SyZq8Lw3Xn5Rk2Vb7Yt4Hm-_" * 2)[:35]
WHSEC = "whsec_" + "Zq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7Y"

OWN_SHAPES = [
    ("anthropic-api-key", f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC),
    ("authorization-header", f"curl -H 'Authorization: Bearer {BEARER}' https://api.example.com",
     BEARER),
    ("authorization-header", f"curl -H \"Authorization: Basic {BASIC}\" https://example.com",
     BASIC),
    ("slack-token", f"SLACK_APP_TOKEN={XAPP}", XAPP),
    ("slack-token", f"refresh with {XOXE} later", XOXE),
    ("slack-token", f"POST {TRIGGER}", TRIGGER),
    ("hugging-face-token", f"HF_TOKEN={HF}", HF),
    ("google-api-key", f"GOOGLE_API_KEY={GOOGLE}", GOOGLE),
    ("stripe-webhook-secret", f"STRIPE_WEBHOOK_SECRET={WHSEC}", WHSEC),
]


@pytest.mark.parametrize(("detector", "line", "value"), OWN_SHAPES,
                         ids=[f"{d}-{i}" for i, (d, _l, _v) in enumerate(OWN_SHAPES)])
def test_a_token_of_a_shape_of_its_own_is_found(tmp_path, detector, line, value):
    assert _found(tmp_path, line + "\n") == [(detector, len(value))]


@pytest.mark.parametrize("line", [
    "ANTHROPIC_API_KEY=sk-ant-api03-xxxx",
    "the Authorization: Bearer header carries YOUR_ACCESS_TOKEN_GOES_HERE",
    "Authorization: Bearer ${API_TOKEN}",
    "Basic authentication is disabled; Basic understanding required",
    "the app token begins xapp-1- and the refresh token xoxe-",
    "see https://hooks.slack.com/triggers/ in the docs",
    "hf_hub_download(repo_id=x) and hf_transfer",
    "AIza is how Google API keys begin",
    "whsec_ then the secret",
])
def test_a_near_miss_of_a_token_shape_is_not_found(tmp_path, line):
    assert _found(tmp_path, line + "\n") == []


def test_a_bearer_token_in_a_tool_calls_header_is_found_and_redacted(tmp_path):
    store = _transcript_store(tmp_path, url="https://api.example.com/v1",
                              authorization=f"Bearer {BEARER}")
    found = _secrets(store)
    assert [(f["detector"], f["path"]) for f in found] == \
        [("authorization-header", "$.tool_calls[0].arguments.authorization")]
    _redacted(store)
    assert BEARER not in (store / "sessions" / "s1.jsonl").read_text()


# -- 7. hashes are no credentials: SRI strings, hex under a key that names a hash

SHA1 = "9f2c4e1a7b3d5f6081c2e4a6b8d0f1e3a5c7b9d2"
SHA256 = "6f1c2a3b4d5e4f608a9b0c1d2e3f4a5b6f1c2a3b4d5e4f608a9b0c1d2e3f4a5b"
SRI = "sha512-3Zq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7Yt4HmZ/+A=="


@pytest.mark.parametrize("line", [
    f'"integrity": "{SRI}",',
    f'{{"sha": "{SHA1}", "node_id": "C_kwDOAbc"}}',
    f'{{"commit": {{"tree": {{"sha": "{SHA1}"}}, "parents": [{{"sha": "{SHA1}"}}]}}}}',
    f'checksum = "{SHA256}"',
    f'"digest": "{SHA256}"',
    f'headSha: "{SHA1}"',
    f'"commit_oid": "{SHA1}"',
    f'ETag: "{SHA256}"',
    f'rev = "{SHA1}"',
    f'"sha256": "{SHA256}"',
    f'- Base commit `{SHA1}`; lockfile hash "{SHA256}"',
])
def test_a_hash_under_a_key_that_names_one_is_no_credential(tmp_path, line):
    assert _found(tmp_path, line + "\n") == []


@pytest.mark.parametrize("line", [f'token = "{SHA1}"', f'{{"client_secret": "{SHA1}"}}',
                                  f'"shape": "{SHA1}"', f'x = "{SHA1}"',
                                  f'the EXPECTED "{SHA1}"'])
def test_hex_under_any_other_key_is_still_found(tmp_path, line):
    assert [d for d, _n in _found(tmp_path, line + "\n")] in (["hex-high-entropy-string"],
                                                              ["secret-keyword"])


def test_a_git_sha_in_a_tool_result_is_no_finding(tmp_path):
    from lecode_memctl.core.facts import FactStore
    from lecode_memctl.core.layout import store_at
    from lecode_memctl.core.sessions import SessionStore

    st = store_at(tmp_path / "store")
    fs = FactStore(st.facts_db)
    with SessionStore(st, exclusions=fs).create("s1") as w:
        w.append_message("assistant", "", epoch=fs.generation(), tool_calls=[
            {"id": "c1", "name": "shell", "arguments": {"cmd": "gh api repos/o/r/commits/main"}}])
        w.append_message("tool", f'{{"sha": "{SHA1}", "commit": {{"tree": {{"sha": "{SHA1}"}}}}}}',
                         tool_call_id="c1", epoch=fs.generation())
    fs.close()
    (Path(st.path) / "MEMORY.md").write_text(f'- lockfile: "integrity": "{SRI}"\n')
    assert _secrets(Path(st.path)) == []


# -- code review of the fixes above


@pytest.mark.parametrize("line", [
    'obj = repo.get_commit("e83c5163316f89bfbde7d9ab23ca2e25604af290")',
    'key = bytes.fromhex("e83c5163316f89bfbde7d9ab23ca2e25604af290")',
    'data = base64.b64decode("SGVsbG8gV29ybGQgdGhpcyBpcyBhIHRlc3Qgc3RyaW5nIGZvciBiYXNlNjQ=")',
])
def test_an_entropy_value_in_a_call_after_an_assignment_is_still_no_finding(tmp_path, line):
    """The call-line filter was narrowed to the keyword detector; the
    entropy detectors, which have no pattern of their own, then reported a
    commit's SHA passed to a call, and redact erased it store-wide."""
    assert _found(tmp_path, line + "\n") == []


@pytest.mark.parametrize("key", ["commit_token", "parentToken", "X-Parent-Token", "blob_token",
                                 "BLOB_READ_WRITE_TOKEN", "REV_PROXY_TOKEN", "oid_client_token"])
def test_a_hex_token_under_a_key_holding_a_hash_word_is_still_found(tmp_path, key):
    found = _found(tmp_path, f'"{key}": "e83c5163316f89bfbde7d9ab23ca2e25604af290"\n')
    assert found, key


@pytest.mark.parametrize("text", ["hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                                  "whsec_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
                                  "Bearer YOUR_TOKEN_xxxxxxxxxxxx_1234567890"])
def test_a_placeholder_of_xs_is_no_finding(tmp_path, text):
    assert _found(tmp_path, text + "\n") == []


def test_an_sri_sha1_integrity_string_is_no_credential(tmp_path):
    assert _found(tmp_path, '"integrity": "sha1-2Z4uD0nYwLqBmdjkKfKrJn7mB2M="\n') == []


def test_a_url_line_of_many_ports_is_scanned_in_linear_time(tmp_path):
    """The URL pattern scanned the rest of a run without spaces from each
    ``://host:``: 440 KB of ``http://localhost:3000,`` took 26.6 s against
    1.2 s.  A password holds no ``:`` or ``/`` now (a URL's password has
    them percent-encoded): each start ends at the next URL."""
    import time

    from lecode_memctl.core.secret_plugins import OWN_PLUGINS

    rx = next(p for p in OWN_PLUGINS if p.name == "BasicAuthURLDetector").patterns[0]
    import re

    pattern = re.compile(rx)
    small, big = "http://localhost:3000," * 2000, "http://localhost:3000," * 20000
    t0 = time.process_time()
    assert pattern.search(small) is None
    t1 = time.process_time()
    assert pattern.search(big) is None
    t2 = time.process_time()
    # (a ratio in one run, not a timed bound: quadratic would be about 100)
    assert (t2 - t1) < 30 * max(t1 - t0, 1e-4)


@pytest.mark.parametrize("line", [
    'client = OpenAI(api_key="sk-proj-Zq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2Vb7Yt4HmZq8Lw3Xn5Rk2")',
    'client = Client("AC5f1c2a3b4d5e4f608a9b0c1d2e3f4a5b", "9f1c2a3b4d5e4f608a9b0c1d2e3f4a5b")',
])
def test_a_credential_passed_to_a_call_after_an_assignment_is_found(tmp_path, line):
    """A second code review: dropping every entropy hit of a call line lost
    an OpenAI project key and a Twilio auth token passed to their SDKs.  On
    a call line only data is dropped: a digest's hex, base64 of text."""
    found = [d for d, _n in _found(tmp_path, line + "\n")]
    assert any(d.endswith("high-entropy-string") for d in found), found
