#!/usr/bin/python3
"""Writes the shipped XYZ files (Ångström). Run from this directory: /usr/bin/python3 generate.py

water    the geometry of T. D. Crawford's programming projects (project 3, STO-3G water,
         E_SCF = -74.942079928192): the bohr coordinates there times 0.529177210903 Å/bohr
         (CODATA 2018), i.e. r(OH) = 1.1 Å, HOH = 104.0°
methane  Td, r(CH) = 1.087 Å (experimental r_e, NIST CCCBDB)
benzene  D6h, r(CC) = 1.397 Å, r(CH) = 1.084 Å (experimental r_e, NIST CCCBDB)
decane   n-C10H22, all-trans zig-zag in the xy plane, standard r(CC) = 1.53 Å, r(CH) = 1.09 Å
         and ideal tetrahedral angles (109.4712°) at every carbon; CH3 groups staggered
"""
import math

BOHR = 0.529177210903


def write(name, comment, atoms):
    with open(f"{name}.xyz", "w") as f:
        f.write(f"{len(atoms)}\n{comment}\n")
        for sym, (x, y, z) in atoms:
            f.write(f"{sym:<2} {x:17.12f} {y:17.12f} {z:17.12f}\n")


def water():
    bohr = [("O", (0.0, -0.143225816552, 0.0)), ("H", (1.638036840407, 1.136548822547, 0.0)),
            ("H", (-1.638036840407, 1.136548822547, 0.0))]
    return [(s, tuple(c * BOHR for c in xyz)) for s, xyz in bohr]


def methane(r=1.087):
    d = r / math.sqrt(3.0)
    return [("C", (0.0, 0.0, 0.0))] + [("H", (sx * d, sy * d, sx * sy * d)) for sx, sy in
                                        ((1, 1), (1, -1), (-1, 1), (-1, -1))]


def benzene(rcc=1.397, rch=1.084):
    atoms = []
    for r, sym in ((rcc, "C"), (rcc + rch, "H")):
        for k in range(6):
            a = math.radians(60.0 * k)
            atoms.append((sym, (r * math.cos(a), r * math.sin(a), 0.0)))
    return atoms


def alkane(n, rcc=1.53, rch=1.09):
    half = math.acos(-1.0 / 3.0) / 2.0  # half the tetrahedral angle
    s, c = rcc * math.sin(half), rcc * math.cos(half)
    carbon = lambda i: (i * s, (i % 2) * c, 0.0)  # carbons -1 and n are virtual, for directions
    unit = lambda v: tuple(x / math.sqrt(sum(y * y for y in v)) for x in v)
    sub = lambda a, b: tuple(x - y for x, y in zip(a, b))
    atoms = [("C", carbon(i)) for i in range(n)]
    for i in range(n):
        here = carbon(i)
        u1, u2 = unit(sub(carbon(i - 1), here)), unit(sub(carbon(i + 1), here))
        away = unit(tuple(-(a + b) for a, b in zip(u1, u2)))
        for sz in (1, -1):  # the two hydrogens out of the carbon plane
            h = tuple(math.cos(half) * a for a in away)
            atoms.append(("H", tuple(p + rch * (d + (sz * math.sin(half) if k == 2 else 0.0))
                                     for k, (p, d) in enumerate(zip(here, h)))))
        for end, virtual in ((0, u1), (n - 1, u2)):  # methyl: a third H where the chain would go on
            if i == end:
                atoms.append(("H", tuple(p + rch * d for p, d in zip(here, virtual))))
    return atoms


write("water", "water, Crawford programming-project geometry (r_OH 1.1 A, HOH 104 deg); E(RHF/STO-3G) = -74.942079928192",
      water())
write("methane", "methane, Td, r_CH 1.087 A (experimental r_e, NIST CCCBDB)", methane())
write("benzene", "benzene, D6h, r_CC 1.397 A, r_CH 1.084 A (experimental r_e, NIST CCCBDB)", benzene())
write("decane", "n-decane C10H22, all-trans, r_CC 1.53 A, r_CH 1.09 A, tetrahedral angles (generate.py)", alkane(10))
