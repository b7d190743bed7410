"""The web console: pages over the live metadata image, group reads and lag history.

``live`` keeps the image and its history, ``lag`` the lag rings and their status,
``cluster`` the clients, ``pages`` shapes the facts, ``app`` serves them (WSGI).
"""
