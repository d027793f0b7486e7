r"""The shipped trained networks and how they are made:

* ``shipped`` - ``capsedu.pretrained(name)``: the shipped networks, checksums, recorded studies
* ``recipes`` - each shipped network's recipe (``Recipe``, ``RECIPES``): kind, config, objective,
  data, schedule
* ``train`` - ``train_recipe``: a recipe's network trained by ``fit`` (on a 28 x 28 or a 40 x 40
  canvas)

The command that trains the shipped networks and writes their records is a tool of the
repository, with the data each recipe trains and is measured on (``coursetools.recipe_data``):
``python -m coursetools.train_zoo NAME``.

Shape legend: none (no tensor shapes of its own).
"""
