package dev.sandbox4j.workspace;

import java.io.InputStream;
import java.util.List;

/** A file system built from commands, for backends that only run commands. */
final class CommandFileSystem implements SupportsFileSystem {
  private final WorkspaceBackend backend;
  private final SupportsCommands commands;

  CommandFileSystem(WorkspaceBackend backend, SupportsCommands commands) {
    this.backend = backend;
    this.commands = commands;
  }

  static String realpath(SupportsCommands commands, String path) {
    throw new UnsupportedOperationException("TODO");
  }

  @Override
  public InputStream openRead(String path) {
    throw new UnsupportedOperationException("TODO");
  }

  @Override
  public void write(String path, InputStream content) {
    throw new UnsupportedOperationException("TODO");
  }

  @Override
  public FileStat stat(String path) {
    throw new UnsupportedOperationException("TODO");
  }

  @Override
  public List<DirectoryEntry> list(String path) {
    throw new UnsupportedOperationException("TODO");
  }

  @Override
  public void createDirectories(String path) {
    throw new UnsupportedOperationException("TODO");
  }

  @Override
  public void remove(String path, boolean recursive) {
    throw new UnsupportedOperationException("TODO");
  }

  @Override
  public void rename(String from, String to) {
    throw new UnsupportedOperationException("TODO");
  }
}
