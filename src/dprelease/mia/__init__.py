"""Membership-inference privacy audit (scores in, bounds out; models loaded only through a release
folder, as an attacker gets them). Reserved: not implemented yet."""
