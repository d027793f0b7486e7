r"""Looking inside trained networks: tensor probes (:mod:`.probes`), figures (:mod:`.figures`),
fast PNG rendering (:mod:`.render`) and the ipywidgets explorers (:mod:`.widgets`)."""
