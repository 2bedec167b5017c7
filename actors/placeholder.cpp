// placeholder, replaced by the actors
namespace muflow::actors {}
