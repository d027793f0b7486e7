r"""The shipped trained networks (:mod:`.shipped`, ``capsedu.pretrained``) and the command that
trains each of them from its recipe (:mod:`.train`, ``python -m capsedu.zoo.train NAME``)."""
