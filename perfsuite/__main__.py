from perfsuite.cli.app import main
from perfsuite.distributed.attach import join, started_by_torchrun

if started_by_torchrun():  # `torchrun ... -m perfsuite run --suite FILE` on every node (README, Distributed)
    raise SystemExit(join(main))
raise SystemExit(main())
