package main

import (
	"errors"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// providerConfig is the planner's model: BALLET_PLANNER_PROVIDER (a key of providers, or
// empty: the planner is off) and the settings it is built from.
type providerConfig struct {
	name    string // BALLET_PLANNER_PROVIDER
	baseURL string // BALLET_PLANNER_BASE_URL
	apiKey  string // BALLET_PLANNER_API_KEY
	model   string // BALLET_PLANNER_MODEL
	script  string // BALLET_PLANNER_SCRIPT: script file of the scripted provider
}

// providers build the model of each BALLET_PLANNER_PROVIDER.
var providers = map[string]func(p *providerConfig) (provider.Provider, error){
	"scripted": func(p *providerConfig) (provider.Provider, error) {
		if p.script == "" {
			return provider.NewScripted(provider.DefaultScript()), nil
		}
		s, err := provider.LoadScript(p.script)
		if err != nil {
			return nil, &configError{Var: "BALLET_PLANNER_SCRIPT", Value: p.script, Msg: err.Error()}
		}
		return provider.NewScripted(s), nil
	},
	"anthropic": func(p *providerConfig) (provider.Provider, error) {
		return provider.NewAnthropic(&provider.AnthropicOptions{BaseURL: p.baseURL, APIKey: p.apiKey, Model: p.model})
	},
	"openai": func(p *providerConfig) (provider.Provider, error) {
		return provider.NewOpenAI(&provider.OpenAIOptions{BaseURL: p.baseURL, APIKey: p.apiKey, Model: p.model})
	},
}

// plannerOptions are the planner's settings with the model the configuration names; nil when
// no provider is named (the planner is then off). The replica adds its logger, observer and bus.
func (c *config) plannerOptions() (*planner.Options, error) {
	if c.provider.name == "" {
		return nil, nil
	}
	model, err := providers[c.provider.name](&c.provider)
	if err != nil {
		if ce := (*configError)(nil); !errors.As(err, &ce) {
			err = &configError{Var: "BALLET_PLANNER_PROVIDER", Value: c.provider.name, Msg: err.Error()}
		}
		return nil, err
	}
	o := c.planner
	o.Provider = model
	return &o, nil
}
