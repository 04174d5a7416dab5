"""asv tracks every workload of this project (time, throughput, peak memory) through perfsuite."""

from perfsuite.frontends.asv import expose

expose(globals())
