"""The worked incident of the seed article (shared/seeds/000_…): its golden questions, policy
sections, chunk → section maps, top-5 rankings and hand-written answers, as test data.

Reference values the tests check come from the article's printed tables, not from our code.
"""

from __future__ import annotations

import json
from pathlib import Path

GOLDEN = [
    {"id": "q01", "muc_ky_vong": ["DT-1"], "nguon": "su-co-2026-09-28",
     "cau_hoi": "Mua áo mặc không vừa thì được trả trong mấy ngày?",
     "tra_loi_ky_vong": "Trong 7 ngày kể từ ngày nhận hàng, hàng còn tem, nhãn và hóa đơn."},
    {"id": "q02", "muc_ky_vong": ["DT-2"], "nguon": "chat-2026-08",
     "cau_hoi": "laptop moi nhan bi soc man hinh thi doi sao",
     "tra_loi_ky_vong": "Lỗi nhà sản xuất được đổi máy mới trong 7 ngày, sau đó bảo hành 12 tháng tại hãng."},
    {"id": "q03", "muc_ky_vong": ["DT-4"], "nguon": "chat-2026-08",
     "cau_hoi": "Trả hàng rồi bao lâu thì nhận lại tiền?",
     "tra_loi_ky_vong": "Trong 5 ngày làm việc sau khi kho nhận hàng trả."},
    {"id": "q04", "muc_ky_vong": ["DT-5"], "nguon": "chat-2026-08",
     "cau_hoi": "Đổi ý không lấy nữa thì có mất phí ship không?",
     "tra_loi_ky_vong": "Có. Khách đổi ý chịu phí vận chuyển 30.000 đồng."},
    {"id": "q05", "muc_ky_vong": ["DT-2", "DT-3"], "nguon": "chat-2026-09",
     "cau_hoi": "Điện thoại có được trả trong 30 ngày như quần áo không?",
     "tra_loi_ky_vong": "Không. Điện thoại lỗi được đổi máy mới trong 7 ngày. Mức 30 ngày chỉ áp dụng cho "
                        "hàng thời trang của thành viên Plus."},
]

POLICY = {
    "DT-1": "Khách được đổi hoặc trả hàng trong 7 ngày kể từ ngày nhận hàng. Hàng phải còn tem, nhãn và hóa đơn.",
    "DT-2": "Điện thoại, laptop, máy tính bảng lỗi do nhà sản xuất được đổi máy mới trong 7 ngày. "
            "Sau đó máy được bảo hành 12 tháng tại hãng.",
    "DT-3": "Thành viên BanHang Plus được đổi trả hàng thời trang trong 30 ngày.",
    "DT-4": "Tiền hoàn về phương thức thanh toán ban đầu trong 5 ngày làm việc sau khi kho nhận hàng trả.",
    "DT-5": "Đổi trả do lỗi của BanHang được miễn phí vận chuyển. Khách đổi ý chịu phí vận chuyển 30.000 đồng.",
    "DT-6": "Thực phẩm, đồ lót và thẻ quà tặng không được đổi trả.",
    # The article names these sections but does not print them; the texts are ours.
    "VC-1": "Đơn nội thành giao trong 1 đến 2 ngày, đơn liên tỉnh giao trong 3 đến 5 ngày.",
    "VC-2": "Phí giao hàng tiêu chuẩn là 25.000 đồng; đơn từ 300.000 đồng được miễn phí giao hàng.",
    "BH-1": "Hàng điện tử được bảo hành theo phiếu của hãng, thời hạn ghi trên phiếu.",
    "BH-2": "Bảo hành không áp dụng cho hư hỏng do rơi vỡ, vào nước hoặc tự ý sửa chữa.",
}

CHUNK = {
    "chunk-200": {"c01": ["DT-1"], "c02": ["DT-2"], "c03": ["DT-3"], "c04": ["DT-4"], "c05": ["DT-5"],
                  "c06": ["DT-6"], "c07": ["VC-1"], "c08": ["VC-2"], "c09": ["BH-1"]},
    "chunk-800": {"L1": ["DT-1", "DT-2"], "L2": ["DT-3", "DT-4"], "L3": ["DT-5", "DT-6"],
                  "L4": ["VC-1", "VC-2"], "L5": ["BH-1", "BH-2"]},
}

TOP5 = {
    "chunk-200": {"q01": ["c01", "c03", "c06", "c07", "c02"], "q02": ["c02", "c09", "c01", "c03", "c06"],
                  "q03": ["c04", "c01", "c05", "c08", "c03"], "q04": ["c07", "c05", "c01", "c08", "c04"],
                  "q05": ["c03", "c02", "c01", "c09", "c06"]},
    "chunk-800": {"q01": ["L2", "L4", "L1", "L3", "L5"], "q02": ["L1", "L5", "L2", "L4", "L3"],
                  "q03": ["L4", "L5", "L2", "L1", "L3"], "q04": ["L4", "L3", "L2", "L1", "L5"],
                  "q05": ["L2", "L5", "L1", "L3", "L4"]},
}

# The article's five hand-written answers (q01 at both sizes; q03, q04, q05 at chunk-800).
SEED_ANSWERS = {
    ("q01", "chunk-200"): "Bạn được đổi hoặc trả trong 7 ngày kể từ ngày nhận hàng, nhớ giữ tem và hóa đơn.",
    ("q01", "chunk-800"): "Bạn có 30 ngày để đổi trả áo, miễn là hàng còn tem và nhãn.",
    ("q03", "chunk-800"): "Tiền sẽ về tài khoản của bạn trong 5 ngày sau khi kho nhận hàng.",
    ("q04", "chunk-800"): "Có. Nếu đổi ý, bạn chịu phí vận chuyển 30.000 đồng.",
    ("q05", "chunk-800"): "Không. Điện thoại lỗi được đổi máy mới trong 7 ngày, sau đó bảo hành 12 tháng tại hãng. "
                          "Mức 30 ngày chỉ dành cho hàng thời trang của thành viên Plus.",
}
# Answers the article does not print, written for the replay so every case has one; all correct.
OUR_ANSWERS = {
    ("q02", "chunk-200"): "Laptop lỗi do nhà sản xuất được đổi máy mới trong 7 ngày, sau đó bảo hành 12 tháng tại hãng.",
    ("q02", "chunk-800"): "Máy lỗi nhà sản xuất được đổi mới trong 7 ngày, rồi bảo hành 12 tháng tại hãng.",
    ("q03", "chunk-200"): "Tiền hoàn về phương thức thanh toán ban đầu trong 5 ngày làm việc sau khi kho nhận hàng trả.",
    ("q04", "chunk-200"): "Có, khách đổi ý chịu phí vận chuyển 30.000 đồng.",
    ("q05", "chunk-200"): "Không. Điện thoại lỗi được đổi máy mới trong 7 ngày; mức 30 ngày chỉ cho hàng thời trang "
                          "của thành viên Plus.",
}
ANSWERS = {**SEED_ANSWERS, **OUR_ANSWERS}


def chunk_text(config: str, chunk_id: str) -> str:
    return "\n\n".join(f"{s}\n{POLICY[s]}" for s in CHUNK[config][chunk_id])


def traces(config: str) -> list[dict]:
    out = []
    for case in GOLDEN:
        q = case["id"]
        ranking = TOP5[config][q]
        out.append({
            "id": q,
            "answer": ANSWERS[(q, config)],
            "retrieved": [{"chunk_id": c, "sections": CHUNK[config][c], "text": chunk_text(config, c),
                           "score": round(1 - 0.1 * i, 2)} for i, c in enumerate(ranking)],
        })
    return out


CONFIG = """\
golden: golden.json
corpus: corpus.yaml
app: {{type: replay, path: {config}.jsonl}}
chunking: {{size: {size}}}
retrieval: {{top_k: 5, k: [1, 3, 5]}}
gate:
  floors: {{hit@3: 0.95, mrr@5: 0.85}}
  zero_tolerance: [numbers]
"""


def write_project(folder: Path) -> dict[str, Path]:
    """golden.json, corpus.yaml, one JSONL of traces and one config per chunk size."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "golden.json").write_text(json.dumps(GOLDEN, ensure_ascii=False, indent=1), encoding="utf-8")
    (folder / "corpus.yaml").write_text(
        "".join(f"{sid}: {json.dumps(text, ensure_ascii=False)}\n" for sid, text in POLICY.items()), encoding="utf-8")
    paths = {}
    for config, size in (("chunk-200", 200), ("chunk-800", 800)):
        (folder / f"{config}.jsonl").write_text(
            "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in traces(config)), encoding="utf-8")
        paths[config] = folder / f"{config}.yml"
        paths[config].write_text(CONFIG.format(config=config, size=size), encoding="utf-8")
    return paths
