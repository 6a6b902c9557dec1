"""Our header: the numbers Python reads are the C compiler's, and the ctypes mirror is its layout."""

from __future__ import annotations

import ast
import ctypes
import re
import subprocess
from pathlib import Path

import pytest
from basert_helpers import ROOT

from superfluid.runtime.basert import header
from superfluid.runtime.basert.config import BaseRTModelConfig, architecture
from superfluid.runtime.errors import BadFile

INCLUDE = ROOT / "runtime" / "basert" / "include"


def compile_and_run(tmp_path: Path, source: str) -> str:
    c = tmp_path / "probe.c"
    c.write_text(source)
    exe = tmp_path / "probe"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", f"-I{INCLUDE}", "-o", str(exe), str(c)],
                   check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def test_requires_is_what_the_compiler_sees(tmp_path: Path) -> None:
    out = compile_and_run(tmp_path, """
        #include <stdio.h>
        #include "baseRT.h"
        int main(void) {
            printf("%d.%d.%d %d %d\\n", BASERT_VERSION_MAJOR, BASERT_VERSION_MINOR, BASERT_VERSION_PATCH,
                   BASERT_ABI_VERSION, BASERT_VERSION);
            return 0;
        }""")
    version, abi, packed = out.split()
    assert header.REQUIRES == {"header": version, "abi": int(abi)}
    assert (header.HEADER_VERSION, header.ABI_VERSION) == (version, int(abi))
    assert int(packed) == (header.FACTS.major << 16) | (header.FACTS.minor << 8) | header.FACTS.patch
    assert header.HEADER_PATH == INCLUDE / "baseRT.h"


def test_the_issue_pair() -> None:
    """Issue 2 states the pair this build drives: header 0.4.0, ABI 1 (and 0.3 unnumbered)."""
    assert header.REQUIRES == {"header": "0.4.0", "abi": 1}
    assert header.UNNUMBERED_LINE == "0.3"


def test_no_number_is_typed_twice() -> None:
    """No loader module holds the header version as a value of its own: they read header.py."""
    modules = ["header", "config", "bindings", "locate", "verdict", "loader", "model", "check", "worker"]
    for name in modules:
        tree = ast.parse((ROOT / "runtime" / "basert" / f"{name}.py").read_text())
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        literals = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in docstrings
                    and isinstance(n.value, str) and header.HEADER_VERSION in n.value]
        assert literals == [], name
        assert not re.search(r"ABI_VERSION\s*=\s*\d", (ROOT / "runtime" / "basert" / f"{name}.py").read_text())


def test_every_field_offset_matches_the_c_layout(tmp_path: Path) -> None:
    fields = [name for name, _ in BaseRTModelConfig._fields_]
    lines = "\n".join(f'    printf("{f} %zu %zu\\n", offsetof(BaseRTModelConfig, {f}), '
                      f'sizeof(((BaseRTModelConfig *)0)->{f}));' for f in fields)
    out = compile_and_run(tmp_path, f"""
        #include <stddef.h>
        #include <stdio.h>
        #include "baseRT.h"
        int main(void) {{
            printf("sizeof %zu %zu\\n", sizeof(BaseRTModelConfig), _Alignof(BaseRTModelConfig));
        {lines}
            return 0;
        }}""")
    c_layout = {name: (int(a), int(b)) for name, a, b in (line.split() for line in out.splitlines())}
    assert c_layout.pop("sizeof") == (ctypes.sizeof(BaseRTModelConfig), ctypes.alignment(BaseRTModelConfig))
    py_layout = {name: (getattr(BaseRTModelConfig, name).offset, getattr(BaseRTModelConfig, name).size)
                 for name in fields}
    assert py_layout == c_layout
    assert len(fields) == 131 and ctypes.sizeof(BaseRTModelConfig) == 1792


# offsets the vendored Rust sys crate asserts for the 0.3 line (notes/basert.md §3.2)
KNOWN_OFFSETS = {
    "n_layers": 4, "norm_eps": 40, "rope_theta": 44, "sliding_window_pattern": 48, "sliding_window": 52,
    "rope_local_theta": 56, "architecture": 60, "enc_n_layers": 92, "enc_max_seq_len": 112,
    "swa_layers": 144, "ffn_dims": 208, "attn_output_gate": 1232, "linear_attn_layers": 1244,
    "gdn_num_k_heads": 1308, "ssm_state_size": 1328, "ssm_num_heads": 1344, "n_experts": 1348,
    "expert_weights_scale": 1368, "vision_n_layers": 1372, "vision_arch": 1432, "audio_n_layers": 1448,
    "eoa_token_id": 1524, "mrope_section": 1528, "mrope_interleaved": 1540, "rope_scaling_factor": 1544,
    "rope_orig_max_pos": 1556, "rope_scaling_type": 1560, "qk_scale_factor": 1564, "nope_layers": 1576,
    "embed_norm_eps": 1640, "vision_window_layers": 1644, "video_token_id": 1724, "q_lora_rank": 1728,
    "indexer_top_k": 1768, "rope_yarn_beta_fast": 1772,
}


@pytest.mark.parametrize(("field", "offset"), sorted(KNOWN_OFFSETS.items()))
def test_published_offsets(field: str, offset: int) -> None:
    assert getattr(BaseRTModelConfig, field).offset == offset


def test_architecture_text() -> None:
    config = BaseRTModelConfig()
    config.architecture = b"qwen3"
    assert architecture(config) == "qwen3"


GOOD = "#define BASERT_VERSION_MAJOR 1\n#define BASERT_VERSION_MINOR 22\n#define BASERT_VERSION_PATCH 3\n" \
       "  #  define BASERT_ABI_VERSION 7  \n"


@pytest.mark.parametrize(("text", "fault"), [
    pytest.param(GOOD.replace("#define BASERT_VERSION_MINOR 22\n", ""), "BASERT_VERSION_MINOR is not defined",
                 id="missing"),
    pytest.param(GOOD + "#define BASERT_ABI_VERSION 2\n", "BASERT_ABI_VERSION is defined 2 times", id="twice"),
    pytest.param(GOOD.replace("PATCH 3", "PATCH (3)"), "BASERT_VERSION_PATCH is '(3)', not a decimal", id="expr"),
    pytest.param(GOOD.replace("MAJOR 1", "MAJOR 1 /* one */"), "BASERT_VERSION_MAJOR is not defined",
                 id="not-alone-on-its-line"),
])
def test_parse_header_refuses(text: str, fault: str) -> None:
    with pytest.raises(BadFile, match=re.escape(fault)):
        header.parse_header(text, "h.h")


def test_parse_header() -> None:
    facts = header.parse_header(GOOD)
    assert (facts.version, facts.abi) == ("1.22.3", 7)


def test_unreadable_header(tmp_path: Path) -> None:
    with pytest.raises(BadFile, match="cannot read our baseRT header"):
        header.read_header(tmp_path / "nope.h")


def test_unnumbered_lines() -> None:
    assert header.unnumbered_line(1) == "0.3"
    assert header.unnumbered_line(2) is None
