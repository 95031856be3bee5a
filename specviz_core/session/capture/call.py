"""One ``generate`` call recorded: its session row, then a row per iteration of transformers' ``_assisted_decoding``
(see :mod:`specviz_core.session.capture`)."""

from __future__ import annotations

import functools
import time
import warnings
from typing import Any

import numpy as np
import torch

from specviz_core.analysis.cycle_summary import summarize
from specviz_core.drafters.hf.assisted import align
from specviz_core.drafters.hf.generate import AssistantSpy, assistant_stop
from specviz_core.drafters.hf.prompt_lookup import lookup_state
from specviz_core.engine.record import cycle_record, plain
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording, new_session_id
from specviz_core.recording.writer import SessionWriter
from specviz_core.records import SessionInfo
from specviz_core.runtime.attention import attention_pattern
from specviz_core.runtime.locations import model_reference
from specviz_core.runtime.vocab import load_token_text
from specviz_core.target_rows import target_rows
from specviz_core.tree import DraftTree, flatten

#: ``generate`` settings kept with each session (``stats["generate"]``), as ``generate`` resolved them.
SETTINGS = ("do_sample", "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "max_length",
            "prompt_lookup_num_tokens", "max_matching_ngram_size", "assistant_early_exit",
            "assistant_ensemble_weight")


def _method(gen: Any) -> str:
    """The SpecViz method that a candidate generator is (raises SpecVizError for one not recorded)."""
    from transformers.generation import candidate_generator as cg

    if type(gen) is cg.PromptLookupCandidateGenerator:
        return "hf_prompt_lookup"
    if type(gen) is cg.AssistedCandidateGenerator:
        return "hf_assisted"
    if type(gen) in (cg.AssistedCandidateGeneratorDifferentTokenizers, cg.UniversalSpeculativeDecodingGenerator):
        return "hf_universal"
    raise SpecVizError(f"specviz.record records assisted generation, universal assisted decoding and prompt lookup; "
                       f"this generate call drafts with transformers' {type(gen).__name__}, which it does not record")


def _model_facts(model: Any) -> tuple[str, str, str, str]:
    """A model's portable name, device, dtype and attention, as a session row names them."""
    name = str(getattr(model.config, "_name_or_path", "") or "") or type(model).__name__
    param = next(model.parameters())
    kernel = str(getattr(model.config, "_attn_implementation", None) or "eager")
    return (model_reference(name), str(getattr(model, "device", None) or param.device),
            str(param.dtype).removeprefix("torch."), f"{kernel}; {attention_pattern(model.config).describe()}")


class CallRecorder:
    """One ``generate`` call: its session row, then a row per iteration of ``_assisted_decoding``."""

    def __init__(self, recording: Recording, model: Any, gen: Any, cfg: Any, input_ids: torch.Tensor,
                 assistant: Any, tokenizer: Any) -> None:
        self.method = _method(gen)
        if getattr(model.config, "is_encoder_decoder", False):
            raise SpecVizError("specviz.record records decoder-only models; this one is an encoder-decoder")
        if input_ids.shape[0] != 1:
            raise SpecVizError(f"assisted generate takes one sequence, got a batch of {input_ids.shape[0]}")
        self.gen = gen
        self.ids: list[int] = input_ids[0].tolist()
        self.prompt_len = len(self.ids)
        eos = getattr(cfg, "_eos_token_tensor", None)
        self.eos = tuple(int(t) for t in eos.reshape(-1).tolist()) if eos is not None else ()
        self.max_length = int(cfg.max_length)
        self.sampled = bool(cfg.do_sample)
        self.source = "ngram" if self.method == "hf_prompt_lookup" else "draft"
        self.spy: AssistantSpy | None = None
        self._spy_calls = 0
        if self.method != "hf_prompt_lookup":
            self.spy = AssistantSpy(gen.assistant_model)
            gen.assistant_model = self.spy  # observes the assistant's generate calls, changes nothing
        name, device, dtype, attention = _model_facts(model)
        text = ""
        try:  # the call's tokenizer, else the model's own from its folder (prompt lookup is given none)
            if tokenizer is not None:
                text = str(tokenizer.decode(self.ids))
            elif (vocab := load_token_text(name)).tokenizer is not None:
                text = vocab.text(self.ids)
        except Exception:  # a tokenizer that cannot decode the prompt: the ids are recorded anyway
            text = ""
        settings = {k: plain(getattr(cfg, k, None)) for k in SETTINGS}
        self.stats: dict[str, Any] = {"recorded_by": "specviz.record", "generate": settings,
                                      "generator": type(gen).__name__}
        info = SessionInfo(
            id=new_session_id(), model=name, tokenizer=name, method=self.method, params=self.params(),
            prompt_ids=tuple(self.ids), prompt_text=text,
            temperature=float(cfg.temperature or 1.0) if self.sampled else 0.0, seed=0, device=device, dtype=dtype,
            attention=attention, draft_model=_model_facts(assistant)[0] if assistant is not None else None,
            max_new_tokens=self.max_length - self.prompt_len)
        self.writer = SessionWriter(recording, info)
        self.index = 0
        self.failed = ""
        self._pending: tuple[list[int], list[float] | None, dict[str, Any], float, float] | None = None
        self.drafted_total = self.matched_total = 0

    # -- what the session row says ---------------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """The method's parameters as this call resolved them (the names ``specviz record --param`` takes)."""
        g = self.gen
        if self.method == "hf_prompt_lookup":
            return {"prompt_lookup_num_tokens": int(g.num_output_tokens),
                    "max_matching_ngram_size": int(g.max_matching_ngram_size)}
        out = {"num_assistant_tokens": int(g.num_assistant_tokens),
               "num_assistant_tokens_schedule": str(g.assistant_generation_config.num_assistant_tokens_schedule),
               "assistant_confidence_threshold": float(g.generation_config.assistant_confidence_threshold or 0.0)}
        if self.method == "hf_universal":
            out.update(target_lookbehind=int(g.target_lookbehind), assistant_lookbehind=int(g.assistant_lookbehind))
        return out

    def settings(self) -> dict[str, Any]:
        """The generator's adaptive settings now (before a draft, and after its update as ``*_next``)."""
        if self.method == "hf_prompt_lookup":
            return {}
        g = self.gen
        return {"num_assistant_tokens": int(g.num_assistant_tokens),
                "assistant_confidence_threshold": float(g.generation_config.assistant_confidence_threshold or 0.0)}

    # -- the watched calls -----------------------------------------------------------------------------------
    def watch(self) -> None:
        """Wrap this generator's two methods (on the object only: its class, and other generators, are untouched)."""
        get, update = self.gen.get_candidates, self.gen.update_candidate_strategy

        @functools.wraps(get)
        def get_candidates(input_ids: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            before = self.settings() if not self.failed else {}
            t0 = time.perf_counter()
            out = get(input_ids, *args, **kwargs)
            self._safely(self._drafted, input_ids, out, before, t0, time.perf_counter())
            return out

        @functools.wraps(update)
        def update_candidate_strategy(input_ids: torch.Tensor, scores: torch.Tensor, num_matches: int) -> Any:
            t_verify = time.perf_counter()
            result = update(input_ids, scores, num_matches)
            self._safely(self._verified, input_ids, scores, int(num_matches), t_verify)
            return result

        self.gen.get_candidates = get_candidates
        self.gen.update_candidate_strategy = update_candidate_strategy

    def _safely(self, fn: Any, *args: Any) -> None:
        if self.failed:
            return
        try:
            fn(*args)
        except Exception as e:  # the recording's failure, never the call's
            self.fail(f"cycle {self.index} could not be recorded: {type(e).__name__}: {e}")

    def _drafted(self, input_ids: torch.Tensor, out: Any, before: dict[str, Any], t0: float, t1: float) -> None:
        cur = int(input_ids.shape[1])
        if cur != len(self.ids):
            raise SpecVizError(f"generate gave {cur} tokens, but the cycles so far committed {len(self.ids)}")
        drafted = out[0][0, cur:].tolist()
        scores: list[float] | None = None
        if self.method == "hf_prompt_lookup":
            g = self.gen
            state = lookup_state(self.ids, drafted, int(g.max_length), int(g.num_output_tokens),
                                 int(g.max_matching_ngram_size))
        else:
            assert self.spy is not None
            call = self.spy.last if self.spy.count > self._spy_calls else None
            self._spy_calls = self.spy.count
            code, text = assistant_stop(call, self.eos, before["assistant_confidence_threshold"],
                                        before["num_assistant_tokens"])
            state = {"generator": type(self.gen).__name__, "draft_stop": code, "draft_stop_text": text,
                     "schedule": str(self.gen.assistant_generation_config.num_assistant_tokens_schedule),
                     "draft_cap": call.max_new_tokens if call is not None else 0,
                     "draft_probs": list(call.probs) if call is not None else []}
            if self.method == "hf_assisted" and call is not None and len(call.probs) >= len(drafted):
                scores = list(call.probs[: len(drafted)])
            if self.method == "hf_universal" and call is not None:
                if call.drafted and not drafted:
                    state.update(draft_stop="reencoding", draft_stop_text=(
                        f"{text}; re-encoded into the target's tokens, the draft added none"))
                state["alignment"] = align(self.gen.assistant_tokenizer, call.drafted, self.gen.target_tokenizer,
                                           drafted)
        state.update(before, candidate_length=len(drafted))
        self._pending = (drafted, scores, state, t0, t1)

    def _verified(self, input_ids: torch.Tensor, logits: torch.Tensor, n_matches: int, t_verify: float) -> None:
        t0 = time.perf_counter()
        if self._pending is None:
            raise SpecVizError("generate verified a draft that was not seen being drafted")
        drafted, scores, state, t_draft, t_drafted = self._pending
        self._pending = None
        k, cache_len = len(drafted), len(self.ids) - 1
        committed = input_ids[0, len(self.ids):].tolist()
        tree = DraftTree(root_token=self.ids[-1], mode="chain" if k else "ar")
        tree.add_chain(drafted, self.source, scores=[float(x) for x in scores] if scores is not None else None)
        block = flatten(tree)
        # the verify rows, after generate's logits processors: [k + 1, V]
        prev = np.array([self.ids[-2] if len(self.ids) > 1 else -1, *block.tokens[:-1]])
        rows = target_rows(logits[0, : k + 1].float(), block.tokens, block.parent_rows, prev)
        # The accepted nodes: the drafted tokens generate kept (its drafts never run past an EOS or max_length, so
        # a cut there only drops the bonus). A dropped bonus is recorded as the target's top token.
        n_acc = 0
        while n_acc < min(k, len(committed)) and drafted[n_acc] == committed[n_acc]:
            n_acc += 1
        bonus = committed[n_acc] if n_acc < len(committed) else int(rows.argmax[n_acc])
        if self.index == 0:
            state["prefill_in_forward"] = self.prompt_len - 1
        state.update(n_matches=n_matches, **{f"{key}_next": v for key, v in self.settings().items()})
        # forward: from the draft to the update: the target's forward, generate's choice and the cache's crop.
        timings = {"draft": (t_drafted - t_draft) * 1000.0, "forward": (t_verify - t_drafted) * 1000.0}
        record = cycle_record(self.index, tree, block, rows, list(range(1, n_acc + 1)), bonus, committed,
                              range(n_acc + 1), state, cache_len, timings)
        timings["build"] = (time.perf_counter() - t0) * 1000.0  # into the record's own timings, as the engine's
        self.writer.append(record, summarize(record))
        self.ids.extend(committed)
        self.index += 1
        self.drafted_total += k
        self.matched_total += n_matches

    # -- the end ---------------------------------------------------------------------------------------------
    def fail(self, reason: str) -> None:
        self.failed = reason
        warnings.warn(f"specviz.record: {reason}; the session is kept, marked failed (the generate call goes on)",
                      RuntimeWarning, stacklevel=3)
        try:
            self.writer.finish("failed", reason, self.stats)
        except SpecVizError:
            pass

    def end(self, output: Any = None, error: BaseException | None = None) -> None:
        if self.writer.finished:
            return
        self.stats.update(cycles=self.index, drafted=self.drafted_total, matched=self.matched_total)
        if error is not None:
            status = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
            self.writer.finish(status, f"{type(error).__name__}: {error}" if str(error) else type(error).__name__,
                               self.stats)
            return
        seq = getattr(output, "sequences", output)
        if isinstance(seq, torch.Tensor) and seq[0].tolist() != self.ids:
            self.fail("the recorded tokens disagree with generate's output")
            return
        if self.ids[self.prompt_len:] and self.ids[-1] in self.eos:
            reason = "eos"
        elif len(self.ids) >= self.max_length:
            reason = "max_new_tokens"
        else:
            reason = "a stopping criterion (stop_strings, max_time, ...)"
        self.writer.finish("complete", reason, self.stats)
