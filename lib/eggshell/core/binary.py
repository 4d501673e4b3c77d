"""Base64 payloads (images, PDFs) out of what is recorded, before anything else reads it.

Hosts put what the model was shown into a tool result, pictures included: a 2 MB screenshot
is base64 text that no search can use and no handoff should repeat, and scanned for secrets
it would use up a payload's whole scan budget, withholding the text after it. So live
capture (redact.redact_payload) and every turn record saved (redact.redact_record, which
`egg import` and egg-save go through) replace each one with a one-line placeholder first.
"""

from __future__ import annotations

BINARY = "[%s not stored by Eggshell: %d characters of base64]"


def without_binary(value: object) -> object:
    """`value` with every base64 payload replaced by a placeholder (a new value; `value` is untouched).

    The shapes are the hosts': `{"base64": ...}` (Claude Code's Read of an image), `{"type":
    "base64", "data": ...}` (a Messages API image or document source), `{"mimeType", "data"}`
    (Gemini's inline data) and `data:...;base64,` URLs (Codex's view_image and input images).
    """
    if isinstance(value, str):
        if value.startswith("data:") and ";base64," in value[:200]:
            mime, _, data = value[5:].partition(";base64,")
            return BINARY % (mime or "data", len(data))
        return value
    if isinstance(value, list):
        return [without_binary(v) for v in value]
    if isinstance(value, dict):
        out = {}
        media = next((value[m] for m in ("media_type", "mimeType") if isinstance(value.get(m), str)), "data")
        for k, v in value.items():
            if k == "base64" and isinstance(v, str):
                out[k] = BINARY % (value.get("type") if isinstance(value.get("type"), str) else "image", len(v))
            elif k == "data" and isinstance(v, str) and (value.get("type") == "base64" or isinstance(value.get("mimeType"), str)):
                out[k] = BINARY % (media, len(v))
            else:
                out[k] = without_binary(v)
        return out
    return value
