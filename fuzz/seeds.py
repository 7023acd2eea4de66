#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into fuzz/corpus/<target>/seed-*: payloads shaped
as the test kit's fakes send them (testkit/src/*.rs) and the fixtures of the decoders' unit tests.
Run from the repository root, then minimize with `scripts/fuzz --cmin`. Idempotent."""

import glob
import hashlib
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def write(target, data):
    if isinstance(data, str):
        data = data.encode()
    elif not isinstance(data, bytes):
        data = json.dumps(data, ensure_ascii=False).encode()
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def rust_strings(path):
    """The string literals of a Rust file, unescaped (plain and raw strings)."""
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    found = []
    for m in re.finditer(r'r(#+)"(.*?)"\1', text, re.S):
        found.append(m.group(2))
    for m in re.finditer(r'(?<![r#\w])"((?:[^"\\]|\\.)*)"', text, re.S):
        s = m.group(1)
        s = re.sub(r"\\\n\s*", "", s)
        s = re.sub(r"\\u\{([0-9a-fA-F]+)\}", lambda u: chr(int(u.group(1), 16)), s)
        s = (s.replace("\\r", "\r").replace("\\n", "\n").replace("\\t", "\t")
             .replace('\\"', '"').replace("\\'", "'").replace("\\\\", "\\"))
        found.append(s)
    return found


# --- Telegram: getUpdates answers as the fake Bot API (testkit/src/telegram.rs) sends them.
BOT = {"id": 4242, "is_bot": True, "first_name": "Hearth", "username": "hearth_bot"}


def user(uid):
    return {"id": uid, "is_bot": False, "first_name": "User", "last_name": str(uid),
            "username": f"user{uid}", "language_code": "en"}


def chat(cid, uid):
    if cid > 0:
        return {"id": cid, "type": "private", "first_name": "User", "last_name": str(uid)}
    return {"id": cid, "type": "supergroup", "title": f"Group {cid}", "is_forum": True}


def tg_message(mid, cid, uid, **extra):
    m = {"message_id": mid, "from": user(uid), "chat": chat(cid, uid), "date": 1700000000}
    m.update(extra)
    return m


telegram_updates = [
    {"update_id": 1, "message": tg_message(1, 7, 7, text="hello there")},
    {"update_id": 2, "message": tg_message(2, -100, 7, text="@hearth_bot what time is it",
                                           entities=[{"type": "mention", "offset": 0, "length": 11}],
                                           message_thread_id=5, is_topic_message=True)},
    {"update_id": 3, "message": tg_message(3, 7, 7, text="/agent@hearth_bot finance",
                                           entities=[{"type": "bot_command", "offset": 0, "length": 17}])},
    {"update_id": 4, "message": tg_message(4, -100, 7, text="thanks",
                                           reply_to_message={"message_id": 3, "date": 0, "from": BOT,
                                                             "chat": chat(-100, 7)})},
    {"update_id": 5, "message": tg_message(5, 7, 7, caption="receipt", photo=[
        {"file_id": "p1", "file_unique_id": "up1", "file_size": 100, "width": 90, "height": 90},
        {"file_id": "p2", "file_unique_id": "up2", "file_size": 9000, "width": 1280, "height": 960}])},
    {"update_id": 6, "message": tg_message(6, 7, 7, document={
        "file_id": "d1", "file_unique_id": "ud1", "file_size": 5000, "file_name": "notes.md",
        "mime_type": "text/markdown"})},
    {"update_id": 7, "message": tg_message(7, 7, 7, voice={
        "file_id": "v1", "file_unique_id": "uv1", "file_size": 3000, "duration": 2,
        "mime_type": "audio/ogg"})},
    {"update_id": 8, "edited_message": tg_message(1, 7, 7, text="hello again", edit_date=1700000100)},
    {"update_id": 9, "callback_query": {"id": "cb1", "from": user(7), "chat_instance": "ci-7",
                                        "data": "c:abc:a", "message": {"message_id": 9, "date": 0,
                                                                       "chat": chat(7, 7), "from": BOT}}},
    {"update_id": 10, "message": tg_message(10, -100, 7, text="group chatter")},
    {"update_id": 11, "message": tg_message(11, -100, 7, text="hi", entities=[
        {"type": "text_mention", "offset": 0, "length": 2, "user": BOT}])},
]
for u in telegram_updates:
    write("telegram_update", {"ok": True, "result": [u]})
write("telegram_update", {"ok": True, "result": telegram_updates})
write("telegram_update", {"ok": True, "result": []})
write("telegram_update", {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 3",
                          "parameters": {"retry_after": 3}})
write("telegram_update", '{"ok":true,"result":[{"update_id":12,"message":{"message_id":1,"date":0,'
                         '"chat":{"id":7,"type":"private"},"from":{"id":7,"first_name":"A"},'
                         '"text":"broken \\ud83d emoji"}}]}')
write("telegram_update", '{"ok":true,"result":[{"update_id":13,"message":{"date":1e400,"text":"x"}}]}')
write("telegram_update", "<html><body>502 Bad Gateway</body></html>")

# --- Discord: gateway frames and REST messages as the fake (testkit/src/discord.rs) sends them.


def dc_user(uid, bot=False):
    name = "hearth" if uid == 4242 else f"user{uid}"
    return {"id": str(uid), "username": name, "global_name": name, "discriminator": "0",
            "avatar": None, "bot": bot, "public_flags": 0}


def dc_message(mid, channel, uid, content, guild=False, mention=False, reply=None, files=()):
    m = {"id": str(mid), "channel_id": str(channel), "author": dc_user(uid), "content": content,
         "timestamp": "2026-01-01T10:00:00.000000+00:00", "edited_timestamp": None, "tts": False,
         "mention_everyone": False, "mentions": [dc_user(4242, True)] if mention else [],
         "mention_roles": [], "attachments": [], "embeds": [], "pinned": False,
         "type": 19 if reply else 0, "flags": 0, "components": []}
    if guild:
        m["guild_id"] = "5"
        m["member"] = {"roles": ["2"], "joined_at": "2026-01-01T00:00:00.000000+00:00",
                       "deaf": False, "mute": False, "flags": 0}
    if reply:
        m["message_reference"] = {"type": 0, "message_id": str(reply), "channel_id": str(channel)}
        m["referenced_message"] = None
    for i, (name, mime, size) in enumerate(files):
        m["attachments"].append({"id": str(900 + i), "filename": name, "content_type": mime, "size": size,
                                 "url": f"https://cdn.discordapp.com/attachments/{channel}/{900 + i}/{name}",
                                 "proxy_url": f"https://media.discordapp.net/attachments/{channel}/{900 + i}/{name}"})
    return m


def frame(kind, data, seq=1):
    return {"op": 0, "t": kind, "s": seq, "d": data}


discord_messages = [
    dc_message(101, 9, 1, "hello"),
    dc_message(102, 3, 1, "<@4242> what is on today?", guild=True, mention=True),
    dc_message(103, 8, 7, "<@!4242> hi", guild=True, mention=True),
    dc_message(104, 9, 1, "see attached", files=[("a.png", "image/png", 1000), ("v.ogg", "audio/ogg", 50),
                                                   ("n.txt", "text/plain", 10)]),
    dc_message(105, 9, 1, "approve", reply=104),
]
for m in discord_messages:
    write("discord_gateway", frame("MESSAGE_CREATE", m))
edited = dict(discord_messages[0], content="hello, edited", edited_timestamp="2026-01-01T10:00:05.000000+00:00")
write("discord_gateway", frame("MESSAGE_UPDATE", edited))
write("discord_gateway", frame("INTERACTION_CREATE", {
    "id": "300", "application_id": "4242", "type": 3, "data": {"custom_id": "c:abc:a", "component_type": 2},
    "channel_id": "9", "user": dc_user(1), "token": "itoken300", "version": 1,
    "message": dict(dc_message(106, 9, 4242, "Approve?"), author=dc_user(4242, True)),
    "locale": "en-US", "entitlements": [], "attachment_size_limit": 26214400,
    "authorizing_integration_owners": {}, "app_permissions": "0"}))
write("discord_gateway", frame("READY", {
    "v": 10, "user": {"id": "4242", "username": "hearth", "global_name": None, "discriminator": "0",
                      "avatar": None, "bot": True, "verified": True, "mfa_enabled": False, "flags": 0},
    "guilds": [], "session_id": "s1", "resume_gateway_url": "ws://127.0.0.1:1",
    "application": {"id": "4242", "flags": 0}}))
write("discord_gateway", {"op": 10, "d": {"heartbeat_interval": 41250}})
write("discord_gateway", {"op": 11})
write("discord_gateway", {"op": 9, "d": False})
write("discord_gateway", frame("RESUMED", {}))
write("discord_rest", discord_messages)
for m in discord_messages:
    write("discord_rest", [m])
write("discord_rest", [{"id": "107", "content": "serenity cannot read this"}, discord_messages[0]])
write("discord_rest", {"message": "Missing Access", "code": 50001})

# --- Matrix: events as Synapse sends them to a client, and a /sync answer carrying them.
ROOM = "!room:example.org"


def mx_event(eid, etype, content, sender="@me:example.org"):
    return {"type": etype, "event_id": eid, "sender": sender, "origin_server_ts": 1795000000000,
            "content": content, "unsigned": {"age": 10}}


matrix_events = [
    mx_event("$1", "m.room.message", {"msgtype": "m.text", "body": "hello hearth"}),
    mx_event("$2", "m.room.message", {"msgtype": "m.text", "body": "> <@hearth:example.org> Approve?\n\napprove",
                                      "format": "org.matrix.custom.html",
                                      "formatted_body": "<mx-reply><blockquote>Approve?</blockquote></mx-reply>approve",
                                      "m.relates_to": {"m.in_reply_to": {"event_id": "$prompt"}}}),
    mx_event("$3", "m.room.message", {"msgtype": "m.text", "body": "in a thread",
                                      "m.relates_to": {"rel_type": "m.thread", "event_id": "$root",
                                                       "is_falling_back": True,
                                                       "m.in_reply_to": {"event_id": "$root"}}}),
    mx_event("$4", "m.room.message", {"msgtype": "m.text", "body": "* fixed",
                                      "m.new_content": {"msgtype": "m.text", "body": "fixed"},
                                      "m.relates_to": {"rel_type": "m.replace", "event_id": "$1"}}),
    mx_event("$5", "m.reaction", {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$prompt", "key": "✅"}}),
    mx_event("$6", "m.room.message", {"msgtype": "m.image", "body": "cat.png", "url": "mxc://example.org/abc",
                                      "info": {"mimetype": "image/png", "size": 1234, "w": 10, "h": 10}}),
    mx_event("$7", "m.room.message", {"msgtype": "m.file", "body": "the report", "filename": "report.pdf",
                                      "info": {"mimetype": "application/pdf", "size": 99},
                                      "file": {"url": "mxc://example.org/enc", "v": "v2",
                                               "key": {"kty": "oct", "key_ops": ["encrypt", "decrypt"],
                                                       "alg": "A256CTR", "k": "qcHVMSgYg-71CauWBezXI5qkaRb0LuIy-Wx5kIaHMIA",
                                                       "ext": True},
                                               "iv": "X85+XgHN+HEAAAAAAAAAAA",
                                               "hashes": {"sha256": "5qG4fFnbbVdlAB1Q72JDKwCagV6Dbkx9uds4rSak37c"}}}),
    mx_event("$8", "m.room.message", {"msgtype": "m.notice", "body": "a bot's notice"}),
    mx_event("$9", "m.room.message", {"msgtype": "m.text", "body": "hey hearth, ping",
                                      "m.mentions": {"user_ids": ["@hearth:example.org"]}}),
    mx_event("$10", "m.room.encrypted", {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEnAC",
                                         "device_id": "DEV", "sender_key": "abc", "session_id": "sess"}),
    mx_event("$11", "m.room.member", {"membership": "join", "displayname": "Me"}),
]
for e in matrix_events:
    write("matrix_event", e)
sync = {"next_batch": "s72595_4483_1934", "rooms": {"join": {ROOM: {
    "timeline": {"events": matrix_events, "limited": True, "prev_batch": "t34-23535_0_0"},
    "state": {"events": []}, "ephemeral": {"events": []}, "account_data": {"events": []},
    "unread_notifications": {"highlight_count": 0, "notification_count": 1}}},
    "invite": {"!new:example.org": {"invite_state": {"events": [
        {"type": "m.room.member", "sender": "@me:example.org", "state_key": "@hearth:example.org",
         "content": {"membership": "invite", "is_direct": True}}]}}},
    "leave": {}},
    "presence": {"events": []}, "account_data": {"events": []}, "to_device": {"events": []},
    "device_lists": {"changed": [], "left": []}, "device_one_time_keys_count": {"signed_curve25519": 50}}
write("matrix_sync", sync)
for e in matrix_events[:4]:
    one = json.loads(json.dumps(sync))
    one["rooms"]["join"][ROOM]["timeline"]["events"] = [e]
    one["rooms"]["invite"] = {}
    write("matrix_sync", one)
write("matrix_sync", {"next_batch": "s1"})

# --- Email: the mails and headers of the email crate's tests and the test kit.
for path in ["channels/email/src/inbound.rs", "channels/email/src/auth.rs", "channels/email/tests/email.rs",
             "testkit/src/email.rs"]:
    if not os.path.exists(os.path.join(ROOT, path)):
        continue
    for s in rust_strings(path):
        s = s.replace("{FROM}", "From: Me <me@example.org>\r\n").replace("{BODY}", "\r\nhello\r\n")
        if re.search(r"^(From|Received|Subject|Content-Type):", s, re.M) and "\n" in s:
            write("email_message", s if "\r\n\r\n" in s else s + "\r\nhello\r\n")
        if "Authentication-Results:" in s:
            for value in re.findall(r"Authentication-Results: (.*?)\r\n(?=\S)", s, re.S):
                write("email_auth", value)
            write("email_auth", s)
        elif re.search(r"(dkim|spf|dmarc)\s*=", s):
            write("email_auth", s)
write("email_message", "From: a@x.org\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"
                       "<html><head><style>p{}</style><script>x()</script></head><body><p>Hi&nbsp;there "
                       "&amp; <b>you</b></p><br><div>line&#33; &#x263A;</div></body></html>\r\n")
write("email_message", "From: a@x.org\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n"
                       "--b\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
                       "Gr=FC=DFe\r\n--b\r\nContent-Type: image/png; name=a.png\r\nContent-Disposition: attachment; filename=a.png\r\n"
                       "Content-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=\r\n--b\r\nContent-Type: message/rfc822\r\n\r\n"
                       "From: b@y.org\r\nSubject: inner\r\n\r\ninner body\r\n--b--\r\n")

# --- The outbound plan: replies as models write them.
para = "lorem ipsum dolor sit amet " * 11
write("outbound_plan", "hello")
write("outbound_plan", "\n\n".join([para.strip()] * 20))
write("outbound_plan", "intro\n```rust\n" + "let x = 1;\n" * 400 + "```\nafter")
write("outbound_plan", "# Title\n\n" + "\n---\n".join(["## Section\n**bold** _it_ `code` [link](https://x.org)"] * 60))
write("outbound_plan", "😀" * 2100 + "\n" + "ü" * 3000)
write("outbound_plan", "- item <b>&amp;</b>\n" * 500)
write("outbound_plan", "````md\n```inner\n```\n````\n" + "word " * 900)
write("outbound_plan", "> quote\n> more\n\n| a | b |\n|---|---|\n| 1 | 2 |\n" * 100)

# --- Tools: the arguments of the tools' unit tests, each after its tool's name on a line.
names = set()
for f in glob.glob(os.path.join(ROOT, "src/tool/**/*.rs"), recursive=True):
    text = open(f).read()
    names |= set(re.findall(r'ToolInfo::new\(\s*"([a-z_0-9]+)"', text))
    names |= set(re.findall(r'const NAME: &(?:\'static )?str = "([a-z_0-9]+)"', text))
calls = 0
for f in glob.glob(os.path.join(ROOT, "src/tool/**/*.rs"), recursive=True):
    text = open(f).read()
    for m in re.finditer(r'"([a-z_0-9]+)",\s*json!\(', text):
        name = m.group(1)
        if name not in names:
            continue
        start = m.end()
        depth, i = 1, start
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        try:
            args = json.loads(text[start:i - 1])
        except ValueError:
            continue
        write("tool_arguments", name.encode() + b"\n" + json.dumps(args).encode())
        calls += 1
for name in sorted(names):
    write("tool_arguments", name.encode() + b"\n{}")
print(f"tools: {len(names)} names, {calls} calls from tests")

# pdf_text: PDFs shaped as testkit/src/pdf.rs writes them (text pages placed with Td, a picture
# page, a password, deep nesting, damage), so the fuzzer starts from files that parse.
def pdf(contents, trailer="", page_extra=""):
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{5 + 2 * i} 0 R" for i in range(len(contents)))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(contents)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    objects.append(b"<< /Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray /BitsPerComponent 8 /Length 1 >>\nstream\n\x80\nendstream")
    for i, content in enumerate(contents):
        objects.append(f"<< /Type /Page {page_extra}/Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> /XObject << /Im1 4 0 R >> >> /Contents {6 + 2 * i} 0 R >>".encode())
        objects.append(f"<< /Length {len(content)} >>\nstream\n".encode() + content + b"\nendstream")
    out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
    offsets = []
    for i, body in enumerate(objects):
        offsets.append(len(out))
        out += f"{i + 1} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R {trailer}>>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def text_page(*lines):
    ops = "BT /F1 12 Tf 72 750 Td 14 TL\n"
    ops += "".join(f"({line}) Tj 0 -14 Td\n" for line in lines)
    return (ops + "[(Kern)-250(ed)] TJ T* (next) ' ET\n").encode()


invoice = pdf([text_page("Invoice 2026-117", "Total due: 42.50 EUR"), text_page("Terms of payment")])
write("pdf_text", invoice)
write("pdf_text", pdf([b"q 400 0 0 600 72 100 cm /Im1 Do Q\n"] * 2))
write("pdf_text", pdf([text_page("secret")], trailer=f"/Encrypt << /Filter /Standard /V 1 /R 2 /O <{'11' * 32}> /U <{'22' * 32}> /P -4 >> /ID [<{'AB' * 16}> <{'AB' * 16}>] "))
write("pdf_text", pdf([text_page("nested")], page_extra="/Junk " + "[" * 300 + "]" * 300 + " "))
write("pdf_text", invoice[: len(invoice) // 2])
write("pdf_text", invoice.replace(b"0000000", b"9999999"))
write("pdf_text", pdf([b"BT /F1 12 Tf 1 0 0 1 72 700 Tm (hostile) Tj 9999999999 TL T* ( Tj ET Q Q Q cm"]))
print("pdf_text: 7 seeds")
