"""The kernel picker: sigconv's variants from the registry (unavailable ones disabled, with the
reason) and the block sizes, those the chosen variant does not take marked ✗ with the reason (choosing one is
refused with the full reason); any other block is typed below the list, beside the blocks the variant takes."""

from __future__ import annotations

from typing import Optional

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

import sigconv
from sigconv import format_block

from .messages import SettingsChanged
from .running import Settings, block_refusal


def variant_options(s: Settings, gpu_reason: str | None) -> list[tuple[str, str, bool, str]]:
    """(id, prompt, enabled, description) for every variant of the op, plus auto."""
    out = [(f"{s.backend}:auto", f"auto ({s.backend})", True, "sigconv picks the variant and block (autotuner)")]
    for v in sigconv.variants(s.op):
        vid = f"{v['backend']}:{v['name']}"
        if not v["available"]:
            short = v["reason"].split(" (")[0]  # the full reason shows below the lists when highlighted
            out.append((vid, f"{v['name']} ({v['backend']}): {short}", False,
                        f"{v['description']}. Not available: {v['reason']}"))
        elif v["backend"] != s.backend:
            out.append((vid, f"{v['name']} ({v['backend']}): backend is {s.backend}", False, v["description"]))
        else:
            out.append((vid, f"{v['name']} ({v['backend']})", True, v["description"]))
    return out


def block_options(s: Settings) -> list[tuple[object, str, Optional[str]]]:
    """(block, prompt, refusal): 'default' plus the blocks the variants of the op list (``variants()[...]
    ["blocks"]``) and the chosen block when it is another. A block the chosen variant does not take is marked ✗
    with the short reason in its prompt; ``refusal`` is the full one (:func:`running.block_refusal`, which also
    refuses it when chosen)."""
    vs = sigconv.variants(s.op)
    allb: list = []
    for v in vs:
        allb += [b for b in v["blocks"] if b not in allb]
    if s.block is not None and s.block not in allb:  # typed: any block the variant takes
        allb.append(s.block)
    allb.sort(key=lambda b: (b[0] * b[1], b) if isinstance(b, tuple) else (b, ()))
    cur = next((v for v in vs if v["name"] == s.variant and v["backend"] == s.backend), None)
    if cur is None:
        dflt = "default"
    elif not cur["blocks"]:
        dflt = "default (none)"
    else:
        dflt = f"default ({format_block(cur['default_block'])})"
    out = [(None, dflt, None)]
    for b in allb:
        why = block_refusal(s, b)
        out.append((b, f"{format_block(b)} ✗ {why[0]}" if why else format_block(b), why[1] if why else None))
    return out


def block_rule(s: Settings) -> str:
    """The blocks the chosen variant takes, in words (``variants()[...]["block_rule"]``)."""
    if s.variant == "auto":
        return "auto picks the block"
    v = next((v for v in sigconv.variants(s.op) if v["name"] == s.variant and v["backend"] == s.backend), None)
    if v is None:
        return ""
    rule = v["block_rule"]
    return f"{v['name']} {rule}" if rule.startswith("takes ") else f"{v['name']} takes {rule}"


class KernelPicker(Vertical):
    """Enter on a variant chooses it; Enter on a block chooses it. Disabled variants cannot be chosen; a ✗ block
    can be highlighted (its reason shows below the lists) and choosing it is refused with that reason. Any block
    can be typed in the box below the blocks ("96", "24x4"; empty for the default): Enter chooses it as the list
    does, the app refusing text that is no block and a block the variant does not take."""

    def __init__(self, settings: Settings, gpu_reason: str | None, **kw) -> None:
        super().__init__(**kw)
        self.settings = settings
        self.gpu_reason = gpu_reason

    def compose(self) -> ComposeResult:
        with Horizontal(id="kernel-lists"):
            with Vertical(id="variant-box"):
                yield Label("Variant", classes="list-title")
                yield OptionList(id="variants")
            with Vertical(id="block-box"):
                yield Label("Block", classes="list-title")
                yield OptionList(id="blocks")
                yield Label("", id="block-rule", markup=False)
                yield Input(placeholder="other block: 96, 24x4", compact=True, id="block-input")
        yield Static("", id="kernel-desc")

    def on_mount(self) -> None:
        self.refresh_lists(self.settings)

    def refresh_lists(self, s: Settings) -> None:
        old, self.settings = self.settings, s
        self._variants = variant_options(s, self.gpu_reason)
        ol = self.query_one("#variants", OptionList)
        chosen = f"{s.backend}:{s.variant}"
        ol.clear_options()
        ol.add_options([Option(("● " if vid == chosen else "  ") + prompt, id=vid, disabled=not en)
                        for vid, prompt, en, _ in self._variants])
        idx = next((i for i, v in enumerate(self._variants) if v[0] == chosen), 0)
        ol.highlighted = idx
        self._blocks = block_options(s)
        bl = self.query_one("#blocks", OptionList)
        bl.clear_options()
        bl.add_options([Option(("● " if b == s.block else "  ") + prompt) for b, prompt, _ in self._blocks])
        bl.highlighted = next((i for i, v in enumerate(self._blocks) if v[0] == s.block), 0)
        self.query_one("#block-rule", Label).update(block_rule(s))
        if s.block != old.block:  # a typed block was chosen (it is in the list now), or another one
            self.query_one("#block-input", Input).value = ""
        desc = next((d for vid, _, _, d in self._variants if vid == chosen), "")
        self.query_one("#kernel-desc", Static).update(
            f"[b]{s.op}[/b] {s.variant} ({s.backend}), block {format_block(s.block)}: {desc}")

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option_list.id == "variants" and event.option_index < len(self._variants):
            vid, prompt, en, desc = self._variants[event.option_index]
            self.query_one("#kernel-desc", Static).update(f"[b]{vid}[/b]: {desc}")
        elif event.option_list.id == "blocks" and event.option_index < len(self._blocks):
            b, prompt, why = self._blocks[event.option_index]
            self.query_one("#kernel-desc", Static).update(f"✗ {why}" if why else f"block {format_block(b)}")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option_list.id == "variants":
            vid = event.option.id
            self.post_message(SettingsChanged("variant", vid))
        else:
            self.post_message(SettingsChanged("block", self._blocks[event.option_index][0]))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """A typed block: the text goes to the app, which parses it (``sigconv.parse_block``) and chooses it as
        a block of the list, or refuses it with the reason."""
        event.stop()
        self.post_message(SettingsChanged("block", event.value))
