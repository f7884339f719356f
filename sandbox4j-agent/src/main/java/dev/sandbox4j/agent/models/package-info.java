/**
 * Models: the Anthropic and OpenAI adapters on their official SDKs (optional dependencies), and
 * {@link dev.sandbox4j.agent.models.FunctionModel} and {@link dev.sandbox4j.agent.models.TestModel}
 * for tests and demos. {@link dev.sandbox4j.agent.models.Models#of} picks one by name.
 */
package dev.sandbox4j.agent.models;
