// A shared library without Tessera's entry point.
extern "C" int not_a_tessera_plugin() { return 42; }
