"""CUDA toolkit: the release catalog (:mod:`~stacklock.cuda.catalog`), the lock
entry (:mod:`~stacklock.cuda.lock_entry`), driver checks
(:mod:`~stacklock.cuda.driver`), coherence of a stack's CUDA
(:mod:`~stacklock.cuda.coherence`).

The catalog ships with stacklock and works offline;
:func:`~stacklock.cuda.refresh.refresh_catalog` checks it against NVIDIA when
NVIDIA can be reached. Import from the module that defines a name: this package
imports nothing, so a resolution (coherence) does not load the NVIDIA page
scraper and BeautifulSoup.
"""
