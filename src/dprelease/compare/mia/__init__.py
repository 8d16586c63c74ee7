"""Membership-inference privacy audit: pure scoring (``scores``) and bounds (``bounds``) maths;
``stages`` load models only through release-format folders (what an attacker gets)."""
