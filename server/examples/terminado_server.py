"""The terminado baseline for `pty_bench`: Jupyter's terminal server (tornado) giving each
WebSocket connection its own terminal running COMMAND, at /websocket.

    python terminado_server.py PORT COMMAND...
"""

import sys

import tornado.ioloop
import tornado.web
from terminado import TermSocket, UniqueTermManager


def main():
    port = int(sys.argv[1])
    manager = UniqueTermManager(shell_command=sys.argv[2:])
    app = tornado.web.Application([(r"/websocket", TermSocket, {"term_manager": manager})])
    app.listen(port, "127.0.0.1")
    print(f"listening on {port}", flush=True)
    tornado.ioloop.IOLoop.current().start()


if __name__ == "__main__":
    main()
