#!/usr/bin/python3
"""An agent product's loop, on each tier in turn: one session (one sandbox
whose Python interpreter lasts) per conversation, fed the snippets a model
sends: a CSV into pandas, a chart (its PNG comes back), scipy.optimize,
scikit-learn and sympy in the same interpreter (a data-science afternoon's
memory in one session), an error the model must read, a flood cut to fit
its context, and state kept from the first call. Prints what came back and each call's latency; exits 0 only when
every tier gave the model what it needed.

    AIRLOCK_GATEWAY=http://127.0.0.1:8088 AIRLOCK_TOKEN=KEY \\
        examples/agent_loop.py --tiers trusted,internal,untrusted
    examples/agent_loop.py --redis unix:///run/airlock/redis.sock --tiers trusted

The tiers need sessions and the datascience image (deploy/policy.example.yaml
gives both on every tier; `--image` to name another with pandas and
matplotlib). Needs only the Python client (client/python)."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client",
                                "python"))
from airlock import AirlockError, Client, tool_answer  # noqa: E402

SALES = b"month,region,total\n" + b"".join(
    b"2026-%02d,%s,%d\n" % (m, r, 100 * m + len(r)) for m in range(1, 13)
    for r in (b"north", b"south"))

# (what the model asks, its code, how to tell the answer gave it what it needed)
SNIPPETS = [
    ("load a CSV into pandas",
     "import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
     "df.groupby('region')['total'].sum()",
     lambda a, r: a["status"] == "ok" and "north" in a["stdout"] and "7860" in a["stdout"]),
    ("draw a chart",
     "import matplotlib.pyplot as plt\n"
     "ax = df.pivot(index='month', columns='region', values='total').plot(kind='bar')\n"
     "ax.set_title('sales by month')\nprint('drawn')",
     lambda a, r: a["status"] == "ok" and len(r.outputs) == 1 and
     r.outputs[0].data.startswith(b"\x89PNG\r\n\x1a\n")),
    ("fit a curve with scipy.optimize",
     "import numpy as np\nfrom scipy.optimize import curve_fit\n"
     "n = df[df.region == 'north']\n"
     "(a, b), _ = curve_fit(lambda x, a, b: a * x + b, np.arange(1.0, 13), n.total.values)\n"
     "print(round(a), round(b))",
     lambda a, r: a["stdout"] == "100 5\n"),
    ("a model with scikit-learn",
     "from sklearn.linear_model import LinearRegression\n"
     "m = LinearRegression().fit(n[['total']], list(range(1, 13)))\n"
     "print(round(m.score(n[['total']], list(range(1, 13))), 3))",
     lambda a, r: a["stdout"] == "1.0\n"),
    ("solve with sympy",
     "import sympy as sp\nx = sp.symbols('x')\nprint(sp.solve(x**2 - 5*x + 6, x))",
     lambda a, r: a["stdout"] == "[2, 3]\n"),
    ("an error the model must read",
     "df['no_such_column'].sum()",
     lambda a, r: a["status"] == "nonzero_exit" and "KeyError: 'no_such_column'" in a["stderr"]
     and '<run_python' in a["stderr"]),
    ("a flood, cut for the model",
     "for i in range(100000):\n    print('row', i)",
     lambda a, r: "bytes cut here" in a["stdout"] and a["stdout"].endswith("row 99999\n") and
     len(a["stdout"]) < 5000 and len(r.stdout) == 988890),
    ("state kept from the first call",
     "print(len(df), 'rows still loaded')",
     lambda a, r: a["stdout"] == "24 rows still loaded\n"),
]


def one_tier(client, tier, image, output_max):
    """The conversation on one tier: (rows printed, every check passed)."""
    rows, ok = [], True
    t0 = time.monotonic()
    try:
        s = client.session(tier=tier, image=image, timeout=120)
    except AirlockError as e:
        return ["| %s | - | - | no session: %s |" % (tier, e)], False
    rows.append("| %s | open a session (%s image) | ok | %d ms |" %
                (tier, image, (time.monotonic() - t0) * 1000))
    with s:
        s.put("sales.csv", SALES)
        for what, code, good in SNIPPETS:
            t0 = time.monotonic()
            r = s.run_python(code)
            ms = (time.monotonic() - t0) * 1000
            a = tool_answer(r, output_max)  # what the model reads
            passed = good(a, r)
            ok = ok and passed
            back = (a["stdout"] or a["stderr"]).strip().splitlines() or [""]
            shown = back[-1] if what.startswith("an error") else back[0]
            if r.outputs:
                shown = "%s + %s (%d bytes)" % (shown, r.outputs[0].mime, len(r.outputs[0].data))
            rows.append("| %s | %s | %s%s | %d ms | %s |" % (
                tier, what, r.status, "" if passed else " NOT AS EXPECTED", ms, shown[:70]))
    return rows, ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", help="straight to Redis (else $AIRLOCK_GATEWAY/$AIRLOCK_TOKEN)")
    ap.add_argument("--tiers", default="trusted,internal,untrusted")
    ap.add_argument("--image", default="datascience")
    ap.add_argument("--output-max", type=int, default=4096,
                    help="bytes of each stream the model reads (head and tail past it)")
    a = ap.parse_args()
    client = Client(redis=a.redis) if a.redis else Client()
    print("| tier | the model asks | status | latency | what came back |")
    print("| --- | --- | --- | --- | --- |")
    all_ok = True
    for tier in [x for x in a.tiers.split(",") if x]:
        rows, ok = one_tier(client, tier, a.image, a.output_max)
        all_ok = all_ok and ok
        print("\n".join(rows), flush=True)
    print("every tier gave the model what it needed" if all_ok else
          "SOME ANSWERS WERE NOT AS EXPECTED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
