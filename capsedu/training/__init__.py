r"""Training any capsedu network: the loop (:mod:`.loop`), checkpoints (:mod:`.checkpoint`),
seeding, run profiles and devices (:mod:`.runtime`)."""
