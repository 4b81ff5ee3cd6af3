"""The kernels of tests/transform/test_wgmma_k_slice.py and test_gather_pipeline.py against torch:
wgmma on column slices of a shared tile (sparse_mla_fwd's Q_shared[:, :512] / [:, 512:]) and
gathered T.Parallel copies issued ahead as cp.async (in-range, out-of-range and negative row
indices: zero-filled rows), under the plain and the split-group schedules."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
                                reason="needs an sm_90 NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))

import tilelang  # noqa: E402
import test_gather_pipeline as gp  # noqa: E402
import test_wgmma_k_slice as ks  # noqa: E402


def _bf(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.float32).to(torch.bfloat16)


@pytest.mark.parametrize("D", [512, 128])
def test_k_slices_match_torch(D):
    k = tilelang.compile(ks._mla_scores(D=D, tail=64), target="sm_90a")
    q, kv = _bf(64, D + 64), _bf(64, D + 64)
    o = torch.empty(64, D, device="cuda", dtype=torch.float32)
    k(q, kv, o)
    s = (q.float() @ kv.float().T).to(torch.bfloat16).float()
    ref = s @ kv[:, :D].float()
    # (|s| reaches 32-64, where one bf16 step is 0.25: a score rounded the other way than torch's
    # moves an output by up to 0.25 |kv|; session 45 saw 0.59 on one element of 32768, unseeded)
    torch.testing.assert_close(o, ref, atol=1.0, rtol=2e-2)


def test_narrow_slabs_match_torch():
    k = tilelang.compile(ks._narrow(), target="sm_90a")
    a, b = _bf(64, 192), _bf(64, 192)
    c = torch.empty(64, 64, device="cuda", dtype=torch.float32)
    k(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().T, atol=0.1, rtol=1e-2)


def _indices(n, topk):
    idx = torch.randint(0, n, (topk,), device="cuda", dtype=torch.int32)
    idx[::7] = n + 3          # past the end: a zero row
    idx[::11] = -1            # negative: a zero row
    return idx


def _gathered(kv, idx):
    ok = (idx >= 0) & (idx < kv.shape[0])
    rows = kv[idx.clamp(0, kv.shape[0] - 1).long()].float()
    return rows * ok[:, None]


@pytest.mark.parametrize("let", [False, True])
@pytest.mark.parametrize("wgmma", [True, False])
def test_gather_scores_match_torch(let, wgmma):
    # (mma.sync through tl.disable_wgmma: a kernel compiled for sm_80 does not launch on sm_90)
    configs = None if wgmma else {"tl.disable_wgmma": True}
    k = tilelang.compile(gp._sparse(let=let), target="sm_90a", pass_configs=configs)
    q, kv, idx = _bf(64, 128), _bf(1024, 128), _indices(1024, 256)
    out = torch.empty(64, 64, device="cuda", dtype=torch.float32)
    k(q, kv, idx, out)
    rows = _gathered(kv, idx)            # 256 x 128, 4 iterations of 64 rows accumulated
    ref = sum(q.float() @ rows[i * 64:(i + 1) * 64].T for i in range(4))
    torch.testing.assert_close(out, ref, atol=0.5, rtol=2e-2)


@pytest.mark.parametrize("split", [None, False])
def test_gather_attention_body_matches_torch(split):
    configs = None if split is None else {"tl.enable_pipeline_split_groups": split}
    k = tilelang.compile(gp._attention(), target="sm_90a", pass_configs=configs)
    q, kv, idx = _bf(64, 64), _bf(1024, 64), _indices(1024, 256)
    out = torch.empty(64, 64, device="cuda", dtype=torch.float32)
    k(q, kv, idx, out)
    rows = _gathered(kv, idx)
    acc = torch.zeros(64, 64, device="cuda")
    for i in range(4):
        r = rows[i * 64:(i + 1) * 64]
        p = (q.float() @ r.T).to(torch.bfloat16).float()
        acc = (acc + p @ r) * 0.5
    torch.testing.assert_close(out, acc, atol=0.5, rtol=2e-2)


def test_unstaged_gather_matches_torch():
    k = tilelang.compile(gp._unstaged(), target="sm_90a")
    kv, idx = _bf(4096, 1024), _indices(4096, 256)
    out = torch.empty(256, 1024, device="cuda", dtype=torch.bfloat16)
    k(kv, idx, out)
    torch.testing.assert_close(out.float(), _gathered(kv, idx) * 2, atol=0, rtol=0)


