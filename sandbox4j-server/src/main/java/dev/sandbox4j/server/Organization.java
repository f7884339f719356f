package dev.sandbox4j.server;

/** An organization as the server's database knows it: its row id and its unique name. */
record Organization(long id, String name) {}
