"""`torchrun ... -m perfsuite.distributed JOBDIR`: one rank of a distributed case (rank.py)."""

from perfsuite.distributed.rank import main

raise SystemExit(main())
