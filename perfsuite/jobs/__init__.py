"""Whole jobs a user asks for, as library calls with plain parameters: a history of commits
(`history`) and a bisection (`bisect`). Each checks its input, opens and resumes its log, measures,
profiles, saves and returns its result; what happens on the way goes to a Listener. The command
line is a thin translation of its arguments into one call; perfsuite.history and perfsuite.bisect
are the same calls."""
