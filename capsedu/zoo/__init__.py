r"""The shipped trained networks and how they are made:

* ``shipped`` - ``capsedu.pretrained(name)``: the shipped networks, checksums, recorded studies
* ``recipes`` - each shipped network's recipe (``Recipe``, ``RECIPES``): kind, config, objective,
  data, schedule
* ``recipe_data`` - a recipe's data (``recipe_data``): its dataset's three splits, fixed pairs,
  the 40 x 40 canvas
* ``train`` - ``train_recipe``: a recipe's network trained by ``fit``

The command that trains the shipped networks and writes their records is a tool of the
repository: ``python -m coursetools.train_zoo NAME``.
"""
