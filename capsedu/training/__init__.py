r"""Training any network: what it is trained for (:mod:`.objectives`), the loop (:mod:`.loop`),
what a trained network says (:mod:`.prediction`), checkpoints (:mod:`.checkpoint`), seeding
(:mod:`.seeding`), train/eval mode (:mod:`.modes`), run profiles (:mod:`.profile`) and the
machine (:mod:`.hardware`)."""
