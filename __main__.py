"""``python -m litmus_replay``: the ``litmus-replay`` command line."""

from litmus_replay.replay.cli import main

if __name__ == "__main__":
    main()
