r"""Adversarial examples against the shipped networks: accuracy against the attack's size.

    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.adversarial_study
    .venv/bin/python -m benchmarks.adversarial_study --images 100 --em-images 20 --out /tmp/a.json
    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.adversarial_study --networks em

For each shipped MNIST network (the CapsNet, the CNN, Efficient-CapsNet, the EM network) and each
Fashion-MNIST one, on the first ``--images`` images of the official test split (``--em-images``
for the EM network, about 40 times slower a step): the accuracy on clean images, under FGSM
(:func:`capsedu.explore.attacks.fgsm`), under PGD (``torchattacks``; 10 steps of eps / 4 from a
random start), under a transfer attack - PGD computed on the same dataset's CNN and shown to
each network, which tells gradient masking (a flat or misleading gradient makes a network look
robust to its own white-box attack, not to images that fool another network) from robustness -
and under a stronger attack, Auto-PGD (:func:`capsedu.explore.attacks.apgd`: 50 steps of an
adapting size on the DLR margin loss, the first attack of AutoAttack), on every network but the
EM network.
Pixel values are in [0, 1]; eps is the L-infinity radius. Each row keeps its per-image results
(``correct``: packed, :func:`capsedu.unpack_correct`) so that networks compare paired. The result is the study JSON that
lesson 13 prints (``capsedu/zoo/studies/adversarial.json`` by default).

``--networks`` re-measures only the named networks (after one is re-shipped) with the same
settings, keeps every other row of the ``--out`` file, and appends what the partial run ran on
and how long it took to the file's ``updates``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from functools import partial
from pathlib import Path

import torch

import capsedu
from benchmarks.measure import machine_record, write_study
from capsedu.explore.attacks import TORCHATTACKS, apgd, attacked_correct, fgsm, pgd
from capsedu.training.paired import pack_correct
from capsedu.zoo.shipped import STUDIES_DIR

DATASETS = {  # dataset -> (its shipped networks, the one transfer attacks are computed on, eps)
    "mnist": (("capsnet", "cnn", "efficient", "em"), "cnn", (0.05, 0.1, 0.2, 0.3)),
    "fashion": (("fashion_capsnet", "fashion_cnn", "fashion_efficient"), "fashion_cnn", (0.02, 0.05, 0.1, 0.2)),
}
PGD_STEPS = 10
APGD_STEPS = 50
NO_APGD = ("em",)  # as weak as the CNN under PGD already, and about 40 times slower a step


def curves(model: torch.nn.Module, source: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
           eps_values: tuple[float, ...], adaptive: bool = True) -> dict:
    r"""Clean accuracy and the FGSM, PGD and transfer-PGD curves of ``model`` (transfer: PGD on
    ``source``), and when ``adaptive`` the Auto-PGD (DLR loss) curve."""
    start = time.perf_counter()
    attacks = {"fgsm": lambda eps: partial(fgsm, model, eps=eps), "pgd": lambda eps: pgd(model, eps, steps=PGD_STEPS),
               "transfer": lambda eps: pgd(source, eps, steps=PGD_STEPS),
               **({"apgd": lambda eps: apgd(model, eps, steps=APGD_STEPS)} if adaptive else {})}
    clean = attacked_correct(model, images, labels, None)
    row = {"images": len(images), "clean": int(clean.sum()) / len(clean), **{name: [] for name in attacks},
           "correct": {"clean": pack_correct(clean), **{name: [] for name in attacks}}}
    for eps in eps_values:
        for name, attack in attacks.items():
            right = attacked_correct(model, images, labels, attack(eps))  # (N,)
            row[name].append(int(right.sum()) / len(right))
            row["correct"][name].append(pack_correct(right))
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def run(images: int, em_images: int, only: tuple[str, ...] | None = None) -> dict:
    r"""The study's rows per dataset; with ``only``, just those networks' rows (and datasets)."""
    result = {}
    for dataset, (names, source_name, eps_values) in DATASETS.items():
        names = tuple(name for name in names if only is None or name in only)
        if not names:
            continue
        load = capsedu.load_mnist if dataset == "mnist" else capsedu.load_fashion_mnist
        test = load("test", download=False, verbose=False)
        source = capsedu.pretrained(source_name)
        networks = {}
        for name in names:
            count = em_images if name == "em" else images
            networks[name] = curves(capsedu.pretrained(name), source, test.images[:count],
                                    test.labels[:count], eps_values, adaptive=name not in NO_APGD)
            print(dataset, name, json.dumps({k: v for k, v in networks[name].items() if k != "correct"}), flush=True)
        result[dataset] = {"test_data": test.source, "eps": list(eps_values),
                           "transfer_from": source_name, "networks": networks}
    return result


def merged(recorded: dict, partial: dict, record: dict) -> dict:
    r"""The study ``recorded`` with the rows of ``partial`` (a run with ``--networks``) in place of
    its own, and ``record`` (what the partial run ran on) appended to its ``updates``."""
    result = copy.deepcopy(recorded)
    updated = []
    for dataset, fresh in partial.items():
        if fresh["eps"] != result[dataset]["eps"] or fresh["test_data"] != result[dataset]["test_data"]:
            raise ValueError(f"the recorded {dataset} study used other eps or test data than this run: "
                             "re-run the whole study (without --networks)")
        for name, row in fresh["networks"].items():
            before = result[dataset]["networks"].get(name)
            if before is not None and before["images"] != row["images"]:
                raise ValueError(f"{name}'s recorded row used {before['images']} images, this run "
                                 f"{row['images']}: pass the recorded --images / --em-images")
            result[dataset]["networks"][name] = row
            updated.append(name)
    result.setdefault("updates", []).append({"networks": updated, **record})
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=500, help="test images per network")
    parser.add_argument("--em-images", type=int, default=200, help="test images for the EM network")
    parser.add_argument("--out", type=Path, default=STUDIES_DIR / "adversarial.json")
    shipped = [name for names, _, _ in DATASETS.values() for name in names]
    parser.add_argument("--networks", nargs="+", choices=shipped, metavar="NAME",
                        help="re-measure only these networks and keep the --out file's other rows "
                             f"(one of {', '.join(shipped)})")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    load_before, start = os.getloadavg(), time.perf_counter()
    if args.networks:
        if not args.out.exists():
            parser.error(f"--networks updates a recorded study, but {args.out} does not exist: run the whole study first")
        partial = run(args.images, args.em_images, tuple(args.networks))
        record = machine_record(start, load_before)
        result = merged(json.loads(args.out.read_text()), partial, record)
        write_study(result, args.out, seconds=record["seconds"])
        return result
    result = {"attacks": {"fgsm": "capsedu.explore.attacks.fgsm: one signed step of eps",
                          "pgd": f"{TORCHATTACKS} PGD: {PGD_STEPS} steps of eps/4 from a random start (seed 0)",
                          "transfer": "the same PGD computed on the dataset's CNN, shown to each network",
                          "apgd": f"{TORCHATTACKS} APGD (Auto-PGD): {APGD_STEPS} steps, 1 restart, the DLR "
                                  f"loss on log(class_scores) (seed 0); not run on {', '.join(NO_APGD)}",
                          "loss": "cross-entropy of log(class_scores) (capsedu.explore.attacks.ScoresAsLogits)"},
              **run(args.images, args.em_images),
              **machine_record(start, load_before)}
    write_study(result, args.out)
    return result


if __name__ == "__main__":
    main()
