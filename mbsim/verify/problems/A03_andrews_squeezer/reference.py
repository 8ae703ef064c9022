"""The reference of A03: the Bari test set's angles (problem andrews) as mbsim's absolute body angles.

The test set's coordinates are beta, Theta, gamma, Phi, delta, Omega, epsilon; the bodies'
absolute angles (the columns 2, 5, ..., 20 of /q, x-y-angle per body) are beta, beta + Theta,
gamma, Phi + delta, delta, Omega + epsilon, epsilon. The sums are done in decimal so that no
digit is lost. Rows: the consistent initial values (subroutine init) and the reference solution
at t = 0.03 s (PSIDE at rtol = atol = 1e-14, subroutine solut), andrews.F rev 1.2. Run
``python reference.py`` to write reference.csv.
"""

from decimal import Decimal, getcontext
from pathlib import Path

getcontext().prec = 40
D = Decimal
BARI = {
    "0": dict(beta=D("-0.0617138900142764496358948458001"), Theta=D("0"),
              gamma=D("0.455279819163070380255912382449"), Phi=D("0.222668390165885884674473185609"),
              delta=D("0.487364979543842550225598953530"), Omega=D("-0.222668390165885884674473185609"),
              epsilon=D("1.23054744454982119249735015568")),
    "0.03": dict(beta=D("0.1581077119629904e+2"), Theta=D("-0.1575637105984298e+2"),
                 gamma=D("0.4082224013073101e-1"), Phi=D("-0.5347301163226948e+0"),
                 delta=D("0.5244099658805304e+0"), Omega=D("0.5347301163226948e+0"),
                 epsilon=D("0.1048080741042263e+1")),
}  # fmt: skip


def absolute(b: dict) -> list:
    return [b["beta"], b["beta"] + b["Theta"], b["gamma"], b["Phi"] + b["delta"], b["delta"],
            b["Omega"] + b["epsilon"], b["epsilon"]]  # fmt: skip


lines = [
    "# IFToMM A03 / Bari test set 'andrews': absolute angles of body1..body7 (reference.py)",
    "t," + ",".join(f"body{k}" for k in range(1, 8)),
]
for t, b in BARI.items():
    lines.append(t + "," + ",".join(format(x.normalize(), "f") if x else "0" for x in absolute(b)))
Path(__file__).with_name("reference.csv").write_text("\n".join(lines) + "\n")
