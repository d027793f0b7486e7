r"""The shipped trained networks (:mod:`.shipped`, ``capsedu.pretrained``), their recipes
(:mod:`.recipes`) and the command that trains each of them (:mod:`.train`,
``python -m capsedu.zoo.train NAME``)."""
