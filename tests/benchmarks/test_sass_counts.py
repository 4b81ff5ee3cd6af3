"""benchmarks/_sass.py: counting HGMMA / UTMALDG / HMMA / LDSM in SASS text (CPU only; a fake
cuobjdump script stands in for the real one)."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_sass_module():
    spec = importlib.util.spec_from_file_location("bench_sass_under_test", ROOT / "benchmarks" / "_sass.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sass = _load_sass_module()

# Shaped like `cuobjdump -sass` output for sm_90a: an address comment, optional predicate, the
# opcode with modifiers, operands, then the encoding; continuation lines hold only encodings.
CANNED = """
	code for sm_90a
		Function : _Z16hgmma_utmaldg_kernelPKvS0_Pv
	.headerflags	@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                               /* 0x00000a00ff017b82 */
                                                                                        /* 0x000fe40000000800 */
        /*00d0*/                   UTMACCTL.PF [UR8] ;                                  /* 0x00000000080079b9 */
        /*02d0*/                   UTMALDG.2D [UR8], [UR14] ;                           /* 0x000000080e0075b4 */
        /*02e0*/               @P0 UTMALDG.3D.MULTICAST [UR8], [UR14], UR4 ;            /* 0x000000080e0075b4 */
        /*0300*/                   UTMASTG.2D [UR4], [UR6] ;                            /* 0x00000004060073b5 */
        /*07a0*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;      /* 0x01e00000081879f0 */
        /*07b0*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR16], R24 ;     /* 0x01e00000101879f0 */
        /*0810*/              @!UPT HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24, gsb0 ; /* 0x01e00000081879f0 */
        /*0900*/                   WARPGROUP.ARRIVE ;                                   /* 0x0000000000007 */
        /*0a00*/                   LDSM.16.M88.4 R8, [R100] ;                           /* 0x000000006408783b */
        /*0a10*/                   LDSM.16.MT88.4 R12, [R100+0x800] ;                   /* 0x000800006408783b */
        /*0a20*/               @P1 LDSM.16.M88.2 R16, [R101] ;                          /* 0x000000006510183b */
        /*0a30*/                   LDS.U.128 R20, [R102] ;                              /* 0x0000000066147984 */
        /*0b00*/                   HMMA.16816.F32 R24, R8, R12, R24 ;                   /* 0x0000000c0818723c */
        /*0b10*/                   HMMA.16816.F32.BF16 R28, R8, R14, R28 ;              /* 0x0000000e081c723c */
        /*1a000*/                  HMMA.1688.F32 R32, R8, R16, R32 ;                    /* 0x000000100820723c */
        /*0c00*/                   EXIT ;                                               /* 0x000000000000794d */
        /*0c10*/                   BRA 0xc10;                                           /* 0xfffffffc00fc7947 */
"""


def test_counts_every_variant_once_per_instruction():
    assert sass.count_opcodes(CANNED) == {"HGMMA": 3, "UTMALDG": 2, "HMMA": 3, "LDSM": 3}


def test_lookalikes_are_not_counted():
    text = """
        /*0000*/                   UTMACCTL.PF [UR8] ;                /* 0x00000000080079b9 */
        /*0010*/                   UTMASTG.2D [UR4], [UR6] ;          /* 0x00000004060073b5 */
        /*0020*/                   LDS.U.128 R20, [R102] ;            /* 0x0000000066147984 */
        /*0030*/                   LDSMX R20, [R102] ;                /* 0x0000000066147984 */
        /*0040*/                   IMAD.WIDE R2, R3, 0x2, R4 ;        /* 0x0000000203027825 */
		Function : HGMMA_UTMALDG_HMMA_LDSM_in_a_name_only
    """
    assert sass.count_opcodes(text) == {"HGMMA": 0, "UTMALDG": 0, "HMMA": 0, "LDSM": 0}


def test_empty_text_and_custom_opcodes():
    assert sass.count_opcodes("") == {"HGMMA": 0, "UTMALDG": 0, "HMMA": 0, "LDSM": 0}
    assert sass.count_opcodes(CANNED, ("UTMASTG", "EXIT", "BRA")) == {"UTMASTG": 1, "EXIT": 1, "BRA": 1}


def test_nvdisasm_style_lines_count_too():
    # nvdisasm prints the same address comments, with fewer columns of padding
    text = "        /*0080*/ HGMMA.64x64x16.F32 R0, gdesc[UR4], RZ, !UPT ;\n" \
           "        /*0090*/ @!P2 UTMALDG.2D [UR8], [UR10] ;\n"
    assert sass.count_opcodes(text) == {"HGMMA": 1, "UTMALDG": 1, "HMMA": 0, "LDSM": 0}


def test_format_counts():
    assert sass.format_counts(None) == ["n/a"] * 4
    assert sass.format_counts({"HGMMA": 3, "UTMALDG": 2, "HMMA": 0, "LDSM": 1}) == ["3", "2", "0", "1"]


def _kernel(cubin=b"\x7fELF-not-really"):
    return types.SimpleNamespace(artifact=types.SimpleNamespace(cubin=cubin))


def _fake_tool(tmp_path, body: str) -> str:
    path = tmp_path / "cuobjdump"
    path.write_text(f"#!{sys.executable}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.skipif(os.name != "posix", reason="fake tool is a script with a shebang")
def test_sass_counts_runs_cuobjdump_on_the_cubin(tmp_path, monkeypatch):
    canned = tmp_path / "canned.sass"
    canned.write_text(CANNED)
    tool = _fake_tool(tmp_path, "import sys\n"
                                "assert sys.argv[1] == '-sass', sys.argv\n"
                                "assert open(sys.argv[2], 'rb').read() == b'\\x7fELF-not-really'\n"
                                f"print(open({str(canned)!r}).read())")
    monkeypatch.setattr(sass, "find_cuobjdump", lambda: tool)
    assert sass.sass_counts(_kernel()) == {"HGMMA": 3, "UTMALDG": 2, "HMMA": 3, "LDSM": 3}


@pytest.mark.skipif(os.name != "posix", reason="fake tool is a script with a shebang")
def test_sass_counts_is_none_when_cuobjdump_fails(tmp_path, monkeypatch):
    tool = _fake_tool(tmp_path, "import sys\nsys.stderr.write('cuobjdump fatal: bad file')\nsys.exit(1)")
    monkeypatch.setattr(sass, "find_cuobjdump", lambda: tool)
    heard = []
    assert sass.sass_counts(_kernel(), log=heard.append) is None
    assert heard and "bad file" in heard[0]


def test_sass_counts_is_none_without_cuobjdump(monkeypatch):
    monkeypatch.setattr(sass, "find_cuobjdump", lambda: None)
    assert sass.sass_counts(_kernel()) is None
    assert sass.format_counts(sass.sass_counts(_kernel())) == ["n/a"] * 4


def test_sass_counts_is_none_without_a_cubin(tmp_path, monkeypatch):
    monkeypatch.setattr(sass, "find_cuobjdump", lambda: "/nonexistent/cuobjdump")
    assert sass.sass_counts(_kernel(cubin=None)) is None
